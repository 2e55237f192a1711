package dev.signet.interop;

import dev.sigstore.AlgorithmRegistry;
import dev.sigstore.KeylessSigner;
import dev.sigstore.KeylessVerifier;
import dev.sigstore.SigningConfigProvider;
import dev.sigstore.TrustedRootProvider;
import dev.sigstore.VerificationOptions;
import dev.sigstore.VerificationOptions.CertificateMatcher;
import dev.sigstore.bundle.Bundle;
import dev.sigstore.oidc.client.OidcClients;
import dev.sigstore.oidc.client.TokenStringOidcClient;
import dev.sigstore.strings.StringMatcher;
import dev.sigstore.trustroot.SigstoreSigningConfig;
import dev.sigstore.trustroot.SigstoreTrustedRoot;
import dev.sigstore.trustroot.Service;
import dev.sigstore.tuf.RootProvider;
import dev.sigstore.tuf.SigstoreTufClient;
import java.io.ByteArrayInputStream;
import java.io.InputStream;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.time.Duration;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;

/**
 * Drives sigstore-java (unchanged, pinned in pom.xml) against a signet instance, for
 * interop/python/test_sigstore_java.py. Only sigstore-java's public API is used: KeylessSigner
 * signs (Fulcio over gRPC, Rekor v1 or v2 and the TSA over HTTP), KeylessVerifier verifies.
 *
 * <pre>
 * sign    --trusted-root F (--signing-config F | --fulcio-url U --rekor-url U [--tsa-url U])
 *         [--rekor-version 1|2] --token JWT --artifact F --bundle OUT [--tls-ca PEM]
 * verify  (--trusted-root F | --tuf-url U --tuf-root F [--tuf-cache DIR]) --bundle F
 *         --artifact F|sha256:HEX [--identity SAN --issuer URL] [--tls-ca PEM]
 * inspect (--trusted-root F | --tuf-url U --tuf-root F [--tuf-cache DIR]) [--signing-config F]
 * </pre>
 *
 * Exit codes (as signet's own CLI): 0 ok, 1 signing or verification failed, 2 usage error. A
 * failure prints one line naming what failed, then the chain of causes.
 */
public final class Main {
  public static void main(String[] args) {
    if (args.length == 0) {
      usage("a subcommand is required: sign, verify or inspect");
    }
    Map<String, String> opts = parse(args);
    try {
      if (opts.containsKey("tls-ca")) {
        trustOnly(Path.of(opts.get("tls-ca")));
      }
      switch (args[0]) {
        case "sign":
          sign(opts);
          break;
        case "verify":
          verify(opts);
          break;
        case "inspect":
          inspect(opts);
          break;
        default:
          usage("unknown subcommand " + args[0] + "; expected sign, verify or inspect");
      }
    } catch (Exception e) {
      System.err.println(args[0] + " failed: " + e);
      for (Throwable c = e.getCause(); c != null; c = c.getCause()) {
        System.err.println("  caused by: " + c);
      }
      System.exit(1);
    }
  }

  private static void sign(Map<String, String> o) throws Exception {
    var rekorVersion = o.getOrDefault("rekor-version", "1");
    if (!rekorVersion.equals("1") && !rekorVersion.equals("2")) {
      usage("--rekor-version must be 1 or 2");
    }
    SigningConfigProvider signingConfig;
    if (o.containsKey("signing-config")) {
      signingConfig = SigningConfigProvider.from(Path.of(o.get("signing-config")));
    } else {
      var json = signingConfigJson(require(o, "fulcio-url"), require(o, "rekor-url"),
          Integer.parseInt(rekorVersion), o.get("tsa-url"));
      signingConfig = () -> SigstoreSigningConfig.from(
          new ByteArrayInputStream(json.getBytes(StandardCharsets.UTF_8)));
    }
    var signer = KeylessSigner.builder()
        .trustedRootProvider(TrustedRootProvider.from(Path.of(require(o, "trusted-root"))))
        .signingConfigProvider(signingConfig)
        .signingAlgorithm(AlgorithmRegistry.SigningAlgorithm.PKIX_ECDSA_P256_SHA_256)
        // With both versions listed, sigstore-java takes the highest it was allowed.
        .enableRekorV2(rekorVersion.equals("2"))
        // The token given, rather than the ambient or browser flows.
        .forceCredentialProviders(OidcClients.of(TokenStringOidcClient.from(require(o, "token"))))
        .build();
    Bundle bundle = signer.signFile(Path.of(require(o, "artifact")));
    Files.writeString(Path.of(require(o, "bundle")), bundle.toJson());
    System.out.println("signed");
  }

  private static void verify(Map<String, String> o) throws Exception {
    var verifier = KeylessVerifier.builder().trustedRootProvider(trustedRoot(o)).build();
    var bundle = Bundle.from(Path.of(require(o, "bundle")), StandardCharsets.UTF_8);
    var options = VerificationOptions.builder();
    if (o.containsKey("identity") || o.containsKey("issuer")) {
      options.addCertificateMatchers(CertificateMatcher.fulcio()
          .subjectAlternativeName(StringMatcher.string(require(o, "identity")))
          .issuer(StringMatcher.string(require(o, "issuer")))
          .build());
    }
    var artifact = require(o, "artifact");
    if (artifact.startsWith("sha256:") && !Files.exists(Path.of(artifact))) {
      verifier.verify(HexFormat.of().parseHex(artifact.substring(7)), bundle, options.build());
    } else {
      verifier.verify(Path.of(artifact), bundle, options.build());
    }
    System.out.println("verified");
  }

  /** Prints what sigstore-java read from the trust material, one `key: value` a line. */
  private static void inspect(Map<String, String> o) throws Exception {
    SigstoreTrustedRoot root = trustedRoot(o).get();
    System.out.println("cas: " + root.getCAs().size());
    System.out.println("tlogs: " + root.getTLogs().size());
    System.out.println("ctlogs: " + root.getCTLogs().size());
    System.out.println("tsas: " + root.getTSAs().size());
    for (var ca : root.getCAs()) {
      System.out.println("ca: " + ca.getUri() + " certs=" + ca.getCertPath().getCertificates().size());
    }
    for (var log : root.getTLogs()) {
      System.out.println("tlog: " + log.getBaseUrl() + " logid="
          + HexFormat.of().formatHex(log.getLogId().getKeyId()));
    }
    if (o.containsKey("signing-config")) {
      var sc = SigningConfigProvider.from(Path.of(o.get("signing-config"))).get();
      print("ca-url", Service.select(sc.getCas(), List.of(1)).map(Service::getUrl).orElse(null));
      print("rekor-v1-url", Service.select(sc.getTLogs(), List.of(1)).map(Service::getUrl).orElse(null));
      print("rekor-v2-url", Service.select(sc.getTLogs(), List.of(2)).map(Service::getUrl).orElse(null));
      print("tsa-url", Service.select(sc.getTsas(), List.of(1)).map(Service::getUrl).orElse(null));
    }
  }

  private static void print(String key, URI value) {
    System.out.println(key + ": " + value);
  }

  /** From a trusted_root.json file, or through sigstore-java's TUF client from a TUF mirror. */
  private static TrustedRootProvider trustedRoot(Map<String, String> o) throws Exception {
    if (o.containsKey("trusted-root")) {
      return TrustedRootProvider.from(Path.of(o.get("trusted-root")));
    }
    if (!o.containsKey("tuf-url")) {
      usage("--trusted-root FILE or --tuf-url URL --tuf-root FILE is required");
    }
    var cache = o.containsKey("tuf-cache")
        ? Path.of(o.get("tuf-cache"))
        : Files.createTempDirectory("sigstore-java-tuf");
    return TrustedRootProvider.from(SigstoreTufClient.builder()
        .tufMirror(URI.create(o.get("tuf-url")), RootProvider.fromFile(Path.of(require(o, "tuf-root"))))
        .tufCacheLocation(cache)
        .cacheValidity(Duration.ZERO));
  }

  /** A signing config (v0.2) naming only the given services, valid from 2020 on. */
  private static String signingConfigJson(String fulcio, String rekor, int rekorVersion, String tsa) {
    String service = "{\"url\": \"%s\", \"majorApiVersion\": %d, \"validFor\": {\"start\": \"2020-01-01T00:00:00Z\"}, \"operator\": \"signet\"}";
    return "{\"mediaType\": \"" + SigstoreSigningConfig.MEDIA_TYPE + "\","
        + "\"caUrls\": [" + String.format(service, fulcio, 1) + "],"
        + "\"oidcUrls\": [],"
        + "\"rekorTlogUrls\": [" + String.format(service, rekor, rekorVersion) + "],"
        + "\"tsaUrls\": [" + (tsa == null ? "" : String.format(service, tsa, 1)) + "],"
        + "\"rekorTlogConfig\": {\"selector\": \"ANY\"},"
        + "\"tsaConfig\": {\"selector\": \"ANY\"}}";
  }

  /**
   * Makes the JVM trust only the CA certificates in `pem` (signet's tls_ca.pem). sigstore-java
   * builds its own connections (gRPC over Netty for Fulcio, Apache HttpClient for Rekor, the TSA
   * and TUF), and both take the JDK's default trust store, which these properties name.
   */
  private static void trustOnly(Path pem) throws Exception {
    var store = KeyStore.getInstance("PKCS12");
    store.load(null, null);
    int i = 0;
    try (InputStream in = Files.newInputStream(pem)) {
      for (Certificate cert : CertificateFactory.getInstance("X.509").generateCertificates(in)) {
        store.setCertificateEntry("signet-" + i++, cert);
      }
    }
    if (i == 0) {
      throw new IllegalArgumentException("no certificate in " + pem);
    }
    var file = Files.createTempFile("signet-trust", ".p12");
    file.toFile().deleteOnExit();
    var password = "signet".toCharArray();
    try (var out = Files.newOutputStream(file)) {
      store.store(out, password);
    }
    System.setProperty("javax.net.ssl.trustStore", file.toString());
    System.setProperty("javax.net.ssl.trustStoreType", "PKCS12");
    System.setProperty("javax.net.ssl.trustStorePassword", new String(password));
  }

  private static Map<String, String> parse(String[] args) {
    Map<String, String> opts = new HashMap<>();
    for (int i = 1; i < args.length; i++) {
      if (!args[i].startsWith("--")) {
        usage("unexpected argument " + args[i]);
      }
      String name = args[i].substring(2);
      if (i + 1 < args.length) {
        opts.put(name, args[++i]);
      } else {
        usage("--" + name + " needs a value");
      }
    }
    return opts;
  }

  private static String require(Map<String, String> o, String name) {
    String value = o.get(name);
    if (value == null) {
      usage("--" + name + " is required");
    }
    return value;
  }

  private static void usage(String message) {
    System.err.println("usage error: " + message);
    System.exit(2);
  }

  private Main() {}
}
