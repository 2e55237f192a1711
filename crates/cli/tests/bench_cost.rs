//! `signet bench cost` against real servers: the dev instance it starts itself, and one
//! already running. The figures are the machine's; what is asserted is what they must be on
//! any machine (a cost above zero, a floor that follows the recipe, the overhead their
//! difference) and that the instance it started is gone at the end.

use crate::common;

use std::process::Command;

use common::Server;
use serde_json::Value;

fn signet(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_signet")).args(args).output().expect("run signet")
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_dev_instance_is_measured_against_its_crypto_floor_and_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("cost.json");
    let out = signet(&[
        "bench", "cost", "--ops", "read,stamp,v1-append", "--seconds", "1", "--warmup", "0.5", "--floor-seconds", "0.02",
        "--rate", "v1-append=400", "--rate", "stamp=400", "--rate", "read=800", "--json", json.to_str().unwrap(),
    ]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "bench cost failed: {table}\n{}", stderr(&out));
    let r: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(r["dev_instance"], true);
    let ops = r["ops"].as_array().unwrap();
    // In their running order, whatever order they were named in: the appends first.
    let names: Vec<&str> = ops.iter().map(|o| o["op"].as_str().unwrap()).collect();
    assert_eq!(names, ["v1-append", "stamp", "read"]);
    let (sign, verify, hash) = (
        r["primitives"]["sign"]["us"].as_f64().unwrap(),
        r["primitives"]["verify"]["us"].as_f64().unwrap(),
        r["primitives"]["hash"]["us"].as_f64().unwrap(),
    );
    assert!(sign > 0.0 && verify > hash && hash > 0.0, "{}", r["primitives"]);
    for o in ops {
        let cpu = o["cpu"]["us_per_op"].as_f64().unwrap_or_else(|| panic!("no CPU reading: {o}"));
        assert!(cpu > 0.0, "{o}");
        assert_eq!(o["errors"], 0, "{o}");
        let overhead = o["overhead_us"].as_f64().unwrap();
        assert!((overhead - (cpu - o["floor"]["us"].as_f64().unwrap())).abs() < 0.02, "{o}");
    }
    let floor = |i: usize| ops[i]["floor"]["us"].as_f64().unwrap();
    // A v1 append verifies, signs its SET, hashes twice, and shares its batch's checkpoint.
    let shared = ops[0]["floor"]["batch_signs_per_op"].as_f64().unwrap();
    assert!(shared > 0.0 && shared <= 1.0, "{}", ops[0]);
    assert!((floor(0) - (verify + sign + 2.0 * hash + shared * sign)).abs() < 0.01, "{}", ops[0]);
    // A stamp signs once and hashes once; a read does neither, nor does it batch.
    assert!((floor(1) - (sign + hash)).abs() < 0.01, "{}", ops[1]);
    assert_eq!(ops[1]["floor"]["batch_signs_per_op"], 0.0);
    assert_eq!(floor(2), 0.0);
    assert!(table.contains("| v1-append |") && table.contains("1 verify + 1 sign + 2 SHA-256 + 1/"), "{table}");
    assert!(table.contains("| read |") && table.contains("| none |"), "{table}");

    let pid = r["server_pid"].as_u64().unwrap();
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists(), "the dev instance {pid} was left running");
}

#[test]
fn a_running_server_is_measured_by_its_pid() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), &[]);
    let pid = server.child.id().to_string();
    let json = dir.path().join("cost.json");
    let out = signet(&[
        "bench", "cost", "--target", &server.url, "--server-pid", &pid, "--ops", "stamp", "--seconds", "1", "--warmup", "0",
        "--floor-seconds", "0.02", "--rate", "stamp=300", "--json", json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let r: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(r["dev_instance"], false);
    assert_eq!(r["server_pid"].as_u64().unwrap().to_string(), pid);
    assert!(r["ops"][0]["cpu"]["us_per_op"].as_f64().unwrap() > 0.0, "{r}");
    // The server this run did not start is still serving.
    assert!(std::path::Path::new(&format!("/proc/{pid}")).exists());
    assert_eq!(common::get(&common::agent(), &format!("{}/api/v1/log", server.url)).unwrap().status, 200);
}

#[test]
fn bad_options_are_refused_with_what_was_expected() {
    let refused = |args: &[&str], expect: &str| {
        let out = signet(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(expect), "{args:?}: {}", stderr(&out));
    };
    refused(&["bench", "cost", "--ops", "append"], "v1-append, v2-append, cert, stamp, read, sign");
    refused(&["bench", "cost", "--rate", "v1-append"], "is not OP=RATE");
    refused(&["bench", "cost", "--rate", "v1-append=0"], "a rate must be in (0, 1000000]");
    refused(&["bench", "cost", "--seconds", "0.5"], "--seconds must be in [1, 600]");
    refused(&["bench", "cost", "--target", "http://127.0.0.1:9"], "--server-pid");
    refused(&["bench", "cost", "--target", "https://127.0.0.1:9", "--server-pid", "1", "--ops", "stamp"], "plain http:// only");
    refused(&["bench", "cost", "--target", "http://127.0.0.1:9", "--server-pid", "1", "--ops", "cert"], "cert needs --token");
}
