//! Shutdown and upgrade of the real binary: SIGTERM lets an in-flight request finish within
//! `shutdown.grace`, closes kept-alive connections waiting for their next request and still
//! serves a connection's first request; `serve --upgrade` plus SIGQUIT hands the listening
//! sockets to a new process without failing a request.

use crate::support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use support::live::{try_open, try_send, Launch};
use support::{closed_within, metric, site, Origin, Proxy, Request, BROWSER};

#[test]
fn sigterm_lets_an_in_flight_slow_request_finish() {
    let origin = Origin::start();
    origin.route_delayed("/slow", 200, "worth the wait", Duration::from_millis(1500));
    let body = site(&origin, "shop.example", "");
    let mut proxy = Launch::new(&body).grace("4s").start();

    let addr = proxy.addr;
    let slow = thread::spawn(move || {
        let mut conn = try_open(addr).expect("connects");
        try_send(
            &mut conn,
            &Request::get("/slow").host("shop.example").ua(BROWSER),
        )
    });
    // Once the origin has the request, it is in flight through the proxy.
    let deadline = Instant::now() + Duration::from_secs(10);
    for _ in 0..1000 {
        if !origin.proxied_to("/slow").is_empty() || Instant::now() > deadline {
            break;
        }
        thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        origin.proxied_to("/slow").len(),
        1,
        "the slow request reached the origin"
    );
    proxy.signal("TERM");

    let answer = slow.join().expect("client thread finishes");
    let answer = answer.expect("the in-flight request is answered");
    assert_eq!(answer.status, 200);
    assert_eq!(answer.text(), "worth the wait");

    // No new connections are taken while draining.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut refused = false;
    for _ in 0..500 {
        refused = TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err();
        if refused || Instant::now() > deadline {
            break;
        }
        thread::sleep(Duration::from_millis(10));
    }
    assert!(refused, "the listener is closed after SIGTERM");

    // The grace period (4 s) and pingora's runtime shutdown (1 s) bound the exit.
    let status = proxy
        .wait_exit(Duration::from_secs(20))
        .expect("the process exits");
    assert!(status.success(), "exit status {status}\n{}", proxy.stderr());
    let log = proxy.stderr();
    assert!(log.contains("SIGTERM received"), "{log}");
    assert!(log.contains("grace period 4s"), "{log}");
    assert!(
        log.contains("All runtimes exited"),
        "the last lines are flushed: {log}"
    );
}

#[test]
fn sigterm_closes_waiting_kept_alive_connections_and_serves_first_requests() {
    let origin = Origin::start();
    let body = site(&origin, "shop.example", "");
    let mut proxy = Launch::new(&body).grace("4s").start();
    let addr = proxy.addr;
    let request = Request::get("/page").host("shop.example").ua(BROWSER);

    // One connection kept alive after its first answer, waiting for its next request; another
    // accepted but with no request sent yet.
    let mut kept = try_open(addr).expect("connects");
    let answer = try_send(&mut kept, &request).expect("the first request is answered");
    assert_eq!(answer.status, 200);
    let mut kept = kept.into_stream();
    let mut fresh = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connects");
    // Both are the proxy's before it is told to stop.
    let deadline = Instant::now() + Duration::from_secs(10);
    for _ in 0..1000 {
        let open = metric(&proxy.metrics(), "robotsguard_downstream_connections", &[]);
        if open >= 2.0 || Instant::now() > deadline {
            break;
        }
        thread::sleep(Duration::from_millis(10));
    }
    proxy.signal("TERM");

    // The waiting connection is closed at once, well within the 4 s grace...
    assert!(
        closed_within(&mut kept, Duration::from_secs(3)).is_some(),
        "a kept-alive connection waiting for its next request is closed at shutdown"
    );
    // ...while the process still serves the other connection's first request, and then closes it.
    fresh.write_all(&request.to_bytes()).expect("sends");
    let _ = fresh.set_read_timeout(Some(Duration::from_secs(10)));
    let mut first = Vec::new();
    let _ = fresh.read_to_end(&mut first);
    let text = String::from_utf8_lossy(&first);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(
        text.to_ascii_lowercase().contains("connection: close"),
        "the answer after shutdown closes its connection: {text}"
    );
    let status = proxy
        .wait_exit(Duration::from_secs(20))
        .expect("the process exits");
    assert!(status.success(), "exit status {status}\n{}", proxy.stderr());
}

#[test]
fn an_upgrade_hands_over_the_listening_sockets_without_failing_a_request() {
    let origin = Origin::start();
    let mut old = Proxy::start(&site(&origin, "shop.example", ""));

    // A client opening a new connection for every request, so each one needs a listener.
    let stop = Arc::new(AtomicBool::new(false));
    let failures = Arc::new(Mutex::new(Vec::new()));
    let client = {
        let (stop, failures, addr) = (stop.clone(), failures.clone(), old.addr);
        thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(60);
            let mut answered_at = Vec::new();
            for i in 0..100_000 {
                if stop.load(Ordering::Acquire) || Instant::now() > deadline {
                    break;
                }
                let request = Request::get(&format!("/page/{i}"))
                    .host("shop.example")
                    .ua(BROWSER)
                    .header("Connection", "close");
                match try_open(addr).and_then(|mut conn| try_send(&mut conn, &request)) {
                    Ok(response) if response.status == 200 => answered_at.push(Instant::now()),
                    Ok(response) => failures
                        .lock()
                        .expect("failures lock")
                        .push(format!("status {}", response.status)),
                    Err(e) => failures.lock().expect("failures lock").push(e),
                }
                thread::sleep(Duration::from_millis(5));
            }
            answered_at
        })
    };

    let new = old.start_upgrade();
    assert!(
        new.wait_log("Bootstrap starting", 1, Duration::from_secs(10)),
        "{}",
        new.stderr()
    );
    old.signal("QUIT");
    // The old process hands its sockets over, keeps serving 5 s (pingora's close timeout), then
    // drains for `shutdown.grace` and exits.
    let status = old
        .wait_exit(Duration::from_secs(30))
        .expect("the old process exits");
    let old_exited = Instant::now();
    assert!(
        status.success(),
        "old exit status {status}\n{}",
        old.stderr()
    );
    // Keep the client going against the new process alone for a moment.
    let deadline = Instant::now() + Duration::from_secs(10);
    for _ in 0..1000 {
        if Instant::now() > deadline || Instant::now() > old_exited + Duration::from_secs(1) {
            break;
        }
        thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, Ordering::Release);
    let answered_at = client.join().expect("client thread finishes");
    let failures = failures.lock().expect("failures lock").clone();

    assert!(
        failures.is_empty(),
        "failed requests: {failures:?}\nnew:\n{}",
        new.stderr()
    );
    let after = answered_at.iter().filter(|at| **at > old_exited).count();
    assert!(
        after > 0,
        "the new process answers once the old one is gone"
    );
    assert!(
        old.stderr().contains("listener sockets sent"),
        "{}",
        old.stderr()
    );
    assert_eq!(
        new.admin_status("/healthz"),
        Some(200),
        "the admin socket moved too"
    );
    assert_eq!(new.get("shop.example", "/after", BROWSER).status, 200);
}
