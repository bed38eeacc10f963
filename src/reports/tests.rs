use super::*;
use crate::config::ReportsConfig;
use crate::snapshot::Snapshot;

fn snapshot() -> Snapshot {
    let yaml =
        "origins:\n  - name: shop\n    hosts: [shop.example]\n    upstream: \"127.0.0.1:9\"\n    \
                robots: {source: inline, text: \"User-agent: *\\nDisallow: /private\\n\"}\n";
    let config = crate::config::load_str(yaml, "test.yaml", std::path::Path::new("/"))
        .unwrap_or_else(|e| panic!("{e}"));
    Snapshot::build(Arc::new(config), None).expect("snapshot")
}

fn decide(snapshot: &Snapshot, ua: &str, path: &str) -> Decision {
    crate::enforce::decide(snapshot, b"shop.example", ua.as_bytes(), path.as_bytes())
        .expect("routed")
}

fn observe(reports: &Reports, decision: &Decision, client: &str, path: &str, bytes: u64) {
    reports.record(&Observed {
        decision,
        failed: false,
        client: Some(client.parse().expect("an address")),
        bytes,
        read_robots: Some(false),
        target: path.as_bytes(),
    });
}

#[test]
fn counts_per_crawler_and_violations_equal_the_requests() {
    let snapshot = snapshot();
    let reports = Reports::new(ReportsConfig::default());
    let blocked = decide(&snapshot, "GPTBot/1.2", "/private/a");
    let allowed = decide(&snapshot, "GPTBot/1.2", "/public");
    let browser = decide(&snapshot, "Mozilla/5.0", "/private/a");
    for client in ["192.0.2.1", "192.0.2.2", "192.0.2.1"] {
        observe(&reports, &blocked, client, "/private/a", 100);
    }
    observe(&reports, &allowed, "192.0.2.3", "/public", 1000);
    observe(&reports, &browser, "192.0.2.9", "/private/a", 5);
    let merged = reports.merge(&[reports.local("shop")]);
    let (since, until) = reports.range(None, None);
    let totals = merged.totals(since, until);
    assert_eq!(
        (
            totals.requests,
            totals.blocked,
            totals.allowed,
            totals.passed
        ),
        (5, 3, 1, 1)
    );
    let crawlers = merged.crawlers(since, until, |_| "OpenAI".to_string());
    assert_eq!(crawlers.len(), 1);
    let gptbot = &crawlers[0];
    assert_eq!(gptbot.name, "GPTBot");
    assert_eq!(
        (
            gptbot.tally.requests,
            gptbot.tally.blocked,
            gptbot.tally.allowed
        ),
        (4, 3, 1)
    );
    // Bytes of refusals are robotsguard's, not taken from the origin.
    assert_eq!(gptbot.tally.bytes, 1000);
    assert_eq!(gptbot.distinct_clients, 3);
    assert_eq!(gptbot.operator, "OpenAI");
    let violations = merged.violations(since, until);
    assert_eq!(violations.error_bound, 0);
    assert_eq!(violations.rows.len(), 1);
    let row = &violations.rows[0];
    assert_eq!(
        (
            row.key.path.as_str(),
            row.key.line,
            row.count,
            row.distinct_clients
        ),
        ("/private/a", 2, 3, 2)
    );
    assert_eq!(row.key.pattern, "/private");
    assert!(row.key.enforced);
}

#[test]
fn two_replicas_merge_into_fleet_totals() {
    let snapshot = snapshot();
    let one = Reports::new(ReportsConfig::default());
    let two = Reports::new(ReportsConfig::default());
    let blocked = decide(&snapshot, "GPTBot/1.2", "/private/a");
    observe(&one, &blocked, "192.0.2.1", "/private/a", 10);
    observe(&two, &blocked, "192.0.2.2", "/private/a", 10);
    observe(&two, &blocked, "192.0.2.2", "/private/b", 10);
    let published: Vec<Published> = [&one, &two]
        .iter()
        .map(|r| {
            let parts = r.take_changed("shop").expect("changed");
            Published::from_parts(Some(&parts.counts), parts.violations.iter().map(|(_, s)| s))
                .expect("parses")
        })
        .collect();
    assert!(
        one.take_changed("shop").is_none(),
        "published once until it changes"
    );
    let merged = one.merge(&published);
    let (since, until) = one.range(None, None);
    let crawlers = merged.crawlers(since, until, |_| String::new());
    assert_eq!(
        (crawlers[0].tally.requests, crawlers[0].distinct_clients),
        (3, 2)
    );
    let violations = merged.violations(since, until);
    let counts: Vec<(&str, u64)> = violations
        .rows
        .iter()
        .map(|r| (r.key.path.as_str(), r.count))
        .collect();
    assert_eq!(counts, vec![("/private/a", 2), ("/private/b", 1)]);
}

#[test]
fn a_flood_of_unique_paths_stays_within_the_bound() {
    let snapshot = snapshot();
    let reports = Reports::new(ReportsConfig {
        top: 100,
        ..ReportsConfig::default()
    });
    for round in 0..20_000u32 {
        let path = format!("/private/{round}/{}", "x".repeat(400));
        let decision = decide(&snapshot, "GPTBot/1.2", &path);
        observe(&reports, &decision, "192.0.2.1", &path, 0);
        if round % 10 == 0 {
            let heavy = decide(&snapshot, "GPTBot/1.2", "/private/heavy");
            observe(&reports, &heavy, "192.0.2.1", "/private/heavy", 0);
        }
    }
    let merged = reports.merge(&[reports.local("shop")]);
    let (since, until) = reports.range(None, None);
    let violations = merged.violations(since, until);
    assert!(violations.rows.len() <= 100);
    assert_eq!(violations.rows[0].key.path, "/private/heavy");
    assert!(violations.rows[0].count >= 2000);
    assert!(violations.error_bound > 0);
    assert!(violations
        .rows
        .iter()
        .all(|r| r.key.path.len() <= MAX_PATH_BYTES + '…'.len_utf8()));
}

#[test]
fn the_range_selects_buckets() {
    let snapshot = snapshot();
    let reports = Reports::new(ReportsConfig::default());
    let blocked = decide(&snapshot, "GPTBot/1.2", "/private/a");
    observe(&reports, &blocked, "192.0.2.1", "/private/a", 10);
    let merged = reports.merge(&[reports.local("shop")]);
    let now = reports.now();
    assert_eq!(merged.totals(now - 3600, now + 1).requests, 1);
    assert_eq!(merged.totals(now - 7200, now - 3600).requests, 0);
    assert!(merged
        .crawlers(now - 7200, now - 3600, |_| String::new())
        .is_empty());
}

/// A request counted in the first second of a bucket is in a report asked for that same second
/// (the default range used to end at the current second, which left that bucket out).
#[test]
fn a_request_is_reported_in_the_second_its_bucket_starts() {
    let settings = ReportsConfig::default();
    let width = Grid::new(settings.window).bucket;
    // A bucket (and a client and violation slice) starts exactly now.
    let start = 1_800_000_000 - 1_800_000_000 % (width * CLIENT_SLICES * VIOLATION_SLICES);
    let reports = Reports::starting_at(settings, start);
    let snapshot = snapshot();
    let blocked = decide(&snapshot, "GPTBot/1.2", "/private/a");
    observe(&reports, &blocked, "192.0.2.1", "/private/a", 0);
    let (since, until) = reports.range(None, None);
    assert_eq!(reports.now(), start, "the test ran within the second");
    let merged = reports.merge(&[reports.local("shop")]);
    assert_eq!(merged.totals(since, until).requests, 1);
    let crawlers = merged.crawlers(since, until, |_| String::new());
    assert_eq!(crawlers.len(), 1, "{crawlers:?}");
    assert_eq!(crawlers[0].tally.requests, 1);
    assert_eq!(crawlers[0].distinct_clients, 1);
    assert_eq!(merged.violations(since, until).rows.len(), 1);
}

/// A violation already counted is found again by what the request gives (no key is built for
/// it), also when its path was cut at `MAX_PATH_BYTES`: one row, counted once per request, with
/// every client and both times, and the same row after a merge of the sketch into another.
#[test]
fn a_violation_counted_again_is_one_row_whether_or_not_its_path_was_cut() {
    let snapshot = snapshot();
    let reports = Reports::new(ReportsConfig::default());
    let long = format!("/private/{}", "y".repeat(MAX_PATH_BYTES));
    for path in ["/private/short", long.as_str()] {
        let decision = decide(&snapshot, "GPTBot/1.2", path);
        for client in ["192.0.2.1", "192.0.2.2", "192.0.2.3"] {
            observe(&reports, &decision, client, path, 0);
        }
    }
    let merged = reports.merge(&[reports.local("shop")]);
    let (since, until) = reports.range(None, None);
    let violations = merged.violations(since, until);
    let mut rows: Vec<(String, u64, u64)> = violations
        .rows
        .iter()
        .map(|row| (row.key.path.clone(), row.count, row.count_error))
        .collect();
    rows.sort();
    let cut = format!("{}…", &long[..MAX_PATH_BYTES]);
    assert_eq!(
        rows,
        vec![("/private/short".to_string(), 3, 0), (cut, 3, 0)]
    );
    assert!(violations.rows.iter().all(|row| row.distinct_clients == 3));

    // A sketch read back (as from the shared store) and counted into again keeps one row per key.
    let mut sketch: Violations = SpaceSaving::new(10);
    for row in &violations.rows {
        sketch.add(&row.key, row.count, &ViolationSeen::default());
        sketch.add(&row.key, 1, &ViolationSeen::default());
    }
    let mut counts: Vec<u64> = sketch.entries().iter().map(|entry| entry.count).collect();
    counts.sort();
    assert_eq!(counts, vec![4, 4]);
}

#[test]
fn every_column_of_the_outcome_table_is_a_field_of_the_tally_and_counts_its_outcomes() {
    for row in &crate::outcome::OUTCOMES {
        let mut tally = Tally::default();
        tally.count(&OneRequest {
            outcome: row.outcome,
            failed: false,
            verification: None,
            bytes: 0,
        });
        let json = serde_json::to_value(tally).expect("serializes");
        assert_eq!(json[row.column.as_str()], 1, "{row:?}: {json}");
        assert_eq!(json["requests"], 1);
    }
}
