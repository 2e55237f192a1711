//! Tests of the criteria format and the decision.

use super::*;
use crate::fixture::result;

fn criteria(text: &str) -> Criteria {
    Criteria::parse(text, "c.toml").unwrap_or_else(|e| panic!("{e}"))
}

fn results(list: &[LoadResult]) -> Vec<(String, LoadResult)> {
    list.iter().enumerate().map(|(i, r)| (format!("r{i}.json"), r.clone())).collect()
}

#[test]
fn absolute_rules_give_go_when_every_check_passes() {
    let c = criteria(
        "[[rule]]\nworkload = \"log-append\"\nmin_rps = 900\nmax_p99_ms = 100\nmax_p50_ms = 50\nmax_p90_ms = 80\nmax_p999_ms = 150\nmax_error_pct = 1\nmax_dropped = 0\nmin_achieved_pct = 90\n",
    );
    let d = c.evaluate(&results(&[result("log-append", 950.0, 40.0, &[])]));
    assert_eq!(d.checks.len(), 8);
    assert!(d.go, "{}", d.render());
    assert!(d.render().ends_with("GO: all 8 checks pass\n"), "{}", d.render());
}

#[test]
fn each_absolute_rule_can_fail() {
    let r = result("log-append", 950.0, 40.0, &[("timeout", 200)]);
    for (rule, criterion) in [
        ("min_rps = 1000", "achieved rps >= 1,000"),
        ("min_achieved_pct = 96", "achieved >= 96% of offered"),
        ("max_p50_ms = 19.9", "p50 <= 19.90 ms"),
        ("max_p90_ms = 31", "p90 <= 31.00 ms"),
        ("max_p99_ms = 39.99", "p99 <= 39.99 ms"),
        ("max_p999_ms = 59", "p99.9 <= 59.00 ms"),
        ("max_error_pct = 1", "errors <= 1%"),
    ] {
        let d = criteria(&format!("rule = [{{ workload = \"log-append\", {rule} }}]")).evaluate(&results(std::slice::from_ref(&r)));
        assert!(!d.go, "{rule} should fail:\n{}", d.render());
        assert_eq!(d.checks[0].criterion, criterion);
        assert!(d.render().contains("NO-GO: 1 of 1 checks fail"), "{}", d.render());
    }
    let mut dropped = r.clone();
    dropped.dropped = 3;
    let d = criteria("[[rule]]\nworkload = \"log-append\"\nmax_dropped = 2\n").evaluate(&results(&[dropped]));
    assert!(!d.go);
}

#[test]
fn parity_rule_passes_within_the_band_and_fails_outside() {
    let mut c = criteria("[[rule]]\nworkload = \"log-append\"\nbaseline = \"base.json\"\nparity_pct = 10\n");
    c.rules[0].baseline_result = Some(result("log-append", 1000.0, 20.0, &[]));
    // 10% slower p99 and 10% less throughput: still at parity.
    let d = c.evaluate(&results(&[result("log-append", 900.0, 22.0, &[])]));
    assert!(d.go, "{}", d.render());
    assert!(d.checks[0].criterion.contains("p99 <= 22.00 ms (baseline 20.00 ms +10%)"), "{:?}", d.checks[0]);
    let d = c.evaluate(&results(&[result("log-append", 1000.0, 23.0, &[])]));
    assert!(!d.go);
    let d = c.evaluate(&results(&[result("log-append", 850.0, 20.0, &[])]));
    assert!(!d.go);
}

#[test]
fn rules_select_by_offered_rate_and_a_missing_result_fails() {
    let c = criteria("[[rule]]\nworkload = \"log-append\"\noffered_rps = 2000\nmax_p99_ms = 100\n");
    let d = c.evaluate(&results(&[result("log-append", 950.0, 40.0, &[])]));
    assert!(!d.go);
    assert_eq!(d.checks[0].measured, "none given");
    assert_eq!(d.unjudged, vec!["r0.json".to_string()]);
    let mut at_2000 = result("log-append", 1990.0, 40.0, &[]);
    at_2000.offered_rps = 2000.0;
    let d = c.evaluate(&results(&[result("log-append", 950.0, 400.0, &[]), at_2000]));
    assert!(d.go, "{}", d.render());
}

#[test]
fn require_any_is_go_when_one_rule_passes() {
    let text = "require = \"any\"\n[[rule]]\nworkload = \"tsa\"\nmax_p99_ms = 1\n[[rule]]\nworkload = \"tsa\"\nmin_rps = 500\n";
    let d = criteria(text).evaluate(&results(&[result("tsa", 950.0, 40.0, &[])]));
    assert!(d.go, "{}", d.render());
    assert_eq!(d.failed(), 1);
    let d = criteria(&text.replace("500", "5000")).evaluate(&results(&[result("tsa", 950.0, 40.0, &[])]));
    assert!(!d.go);
}

#[test]
fn unknown_keys_are_rejected_by_name() {
    let err = Criteria::parse("[[rule]]\nworkload = \"tsa\"\nmax_p99 = 5\n", "c.toml").unwrap_err();
    let msg = err.to_string();
    assert!(msg.starts_with("c.toml:3: unknown field `max_p99`"), "{msg}");
    let err =
        Criteria::parse("requre = \"all\"\n[[rule]]\nworkload = \"tsa\"\nmax_p99_ms = 5\n", "c.toml").unwrap_err();
    assert!(err.to_string().contains("unknown field `requre`"), "{err}");
}

#[test]
fn incomplete_rules_are_rejected() {
    let no_checks = Criteria::parse("[[rule]]\nworkload = \"tsa\"\n", "c.toml").unwrap_err();
    assert!(no_checks.to_string().contains("rule 1 (tsa) has no checks"), "{no_checks}");
    let half_parity = Criteria::parse("[[rule]]\nworkload = \"tsa\"\nparity_pct = 10\n", "c.toml").unwrap_err();
    assert!(half_parity.to_string().contains("baseline and parity_pct go together"), "{half_parity}");
    let negative = Criteria::parse("[[rule]]\nworkload = \"tsa\"\nmin_rps = -1\n", "c.toml").unwrap_err();
    assert!(negative.to_string().contains("min_rps = -1; expected a number >= 0"), "{negative}");
    assert!(Criteria::parse("", "c.toml").unwrap_err().to_string().contains("no [[rule]] tables"));
}

#[test]
fn baselines_are_read_relative_to_the_criteria_file() {
    let dir = std::env::temp_dir().join(format!("signet-gonogo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let base = result("log-append", 1000.0, 20.0, &[]);
    std::fs::write(dir.join("base.json"), serde_json::to_string(&base).unwrap()).unwrap();
    std::fs::write(
        dir.join("c.toml"),
        "[[rule]]\nworkload = \"log-append\"\nbaseline = \"base.json\"\nparity_pct = 5\n",
    )
    .unwrap();
    let c = Criteria::from_file(&dir.join("c.toml")).unwrap();
    assert_eq!(c.rules[0].baseline_result.as_ref(), Some(&base));
    std::fs::write(
        dir.join("c.toml"),
        "[[rule]]\nworkload = \"log-append\"\nbaseline = \"nope.json\"\nparity_pct = 5\n",
    )
    .unwrap();
    let err = Criteria::from_file(&dir.join("c.toml")).unwrap_err();
    assert!(
        err.to_string().contains("rule 1 baseline:") && err.to_string().contains("nope.json: cannot read"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
