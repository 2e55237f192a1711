//! Issue 17 item 9: the guard's store thread keeps its schedule under a stream of bans, and
//! its tables stay bounded whatever number of clients shows up.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use signet_guard::client::{ClientKey, Keying};
use signet_guard::config::{BanConfig, RateLimitConfig};
use signet_guard::limiters::Limiters;
use signet_guard::{Guard, GuardConfig, Role, Store};

/// A ban every few milliseconds used to keep the store thread in its ban branch forever:
/// a token created by `signet admin` was never seen, and idle clients were never swept.
#[test]
fn a_stream_of_bans_does_not_starve_the_poll_or_the_sweep() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = GuardConfig::default();
    config.ban = BanConfig { enabled: true, max_refusals: 1, window_secs: 60, duration_secs: 600 };
    let guard = Guard::open(dir.path(), config).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let striker = {
        let (guard, stop) = (guard.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut n: u32 = 0;
            while !stop.load(Ordering::Relaxed) {
                // Two refusals ban a client: a new ban every ~5 ms, far faster than the poll.
                let client = ClientKey::Ip(IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + n)));
                guard.strike(client, "test");
                guard.strike(client, "test");
                n += 1;
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    let (token, _) = Store::open(dir.path()).unwrap().create_token(Some("late"), Role::reader(), None, Default::default()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !matches!(guard.authenticate(&token.plaintext), Some(Ok(_))) {
        assert!(Instant::now() < deadline, "a token created beside the server was not seen within 5 s of bans");
        std::thread::sleep(Duration::from_millis(20));
    }
    let deadline = Instant::now() + Duration::from_secs(25);
    while guard.sweeps() == 0 {
        assert!(Instant::now() < deadline, "no sweep within 25 s of bans");
        std::thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, Ordering::Relaxed);
    striker.join().unwrap();
}

/// A million distinct clients leave the rate limiter's tables at their cap.
#[test]
fn a_million_clients_leave_the_tables_bounded() {
    let config = RateLimitConfig { enabled: true, per_second: 10, burst: 10, write_per_second: None, write_burst: None };
    let cap = 10_000;
    let limiters = Limiters::new(&config, cap);
    let keying = Keying::default();
    for n in 0..1_000_000u32 {
        let key = keying.key(IpAddr::V4(Ipv4Addr::from(0x0b00_0000 + n)));
        let _ = limiters.check(&key, n % 2 == 0);
    }
    let (reads, writes) = limiters.tracked();
    // A table is counted every CHECK_EVERY decisions per thread, so it may overshoot by that.
    let bound = cap + signet_guard::limiters::CHECK_EVERY as usize + 1;
    assert!(reads <= bound && writes <= bound, "tracked {reads} reads, {writes} writes with a cap of {cap}");

    // A million addresses in one /64 are one client: its burst of 10 runs out.
    let limiters = Limiters::new(&config, cap);
    let base = u128::from("2001:db8:77::".parse::<Ipv6Addr>().unwrap());
    let admitted = (0..1_000_000u128).filter(|n| limiters.check(&keying.key(IpAddr::V6((base + n * 7919).into())), false).is_ok()).count();
    assert!(admitted <= 20, "one /64 got {admitted} requests through a burst of 10");
    assert_eq!(limiters.tracked().0, 1);
}
