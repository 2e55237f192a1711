// Verifies a Sigstore bundle with the sigstore npm package's own `verify`, trusting what it
// fetches from a TUF repository (signet's, in the tests).
//   node verify.mjs BUNDLE ARTIFACT|- TUF_URL TUF_ROOT CACHE_DIR EMAIL ISSUER
// Prints `verified`, or the library's error code and message and exits 1.
import { readFileSync } from 'node:fs';
import { verify } from 'sigstore';

const [bundle, artifact, tufMirrorURL, tufRootPath, tufCachePath, email, issuer] = process.argv.slice(2);
try {
  await verify(JSON.parse(readFileSync(bundle, 'utf8')), artifact === '-' ? undefined : readFileSync(artifact), {
    tufMirrorURL, tufRootPath, tufCachePath, certificateIdentityEmail: email, certificateIssuer: issuer,
  });
  console.log('verified');
} catch (e) {
  console.error(`${e.code ?? 'ERROR'}: ${e.message}`);
  process.exit(1);
}
