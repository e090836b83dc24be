//! Readers for what the load generators print: wrk, h2load, iperf3 and our own `bench-load`
//! clients (`key=value` words). Pure: text in, numbers out.

/// One run of a load generator, reduced to what the report needs.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Run {
    /// Operations per second (requests, handshakes, round trips), or Mbit/s for throughput.
    pub value: f64,
    /// Operations completed in the run (for the CPU-per-operation figure).
    pub ops: f64,
    /// Seconds the run measured.
    pub secs: f64,
    /// Failed operations (socket errors, non-2xx answers, h2 stream errors).
    pub errors: u64,
    /// Latency percentiles in milliseconds, when the tool gives them.
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub p999_ms: Option<f64>,
}

/// Milliseconds from a wrk duration: `591.00us`, `1.03ms`, `2.00s`, `1.50m`.
pub fn wrk_ms(s: &str) -> Option<f64> {
    let split = s.find(|c: char| c.is_ascii_alphabetic())?;
    let (n, unit) = s.split_at(split);
    let n: f64 = n.parse().ok()?;
    let factor = match unit {
        "us" => 0.001,
        "ms" => 1.0,
        "s" => 1000.0,
        "m" => 60_000.0,
        "h" => 3_600_000.0,
        _ => return None,
    };
    Some(n * factor)
}

/// wrk's summary (run with `--latency`): req/s, percentiles, socket errors and non-2xx/3xx.
pub fn wrk(text: &str) -> Option<Run> {
    let mut run = Run::default();
    let (mut rps, mut ops, mut secs) = (None, None, None);
    for line in text.lines().map(str::trim) {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w.as_slice() {
            ["Requests/sec:", v, ..] => rps = v.parse().ok(),
            ["50%", v, ..] => run.p50_ms = wrk_ms(v),
            ["99%", v, ..] => run.p99_ms = wrk_ms(v),
            // "802532 requests in 10.00s, 95.66MB read"
            [n, "requests", "in", d, ..] => {
                ops = n.parse().ok();
                secs = d
                    .trim_end_matches(',')
                    .strip_suffix('s')
                    .and_then(|s| s.parse().ok());
            }
            // "Socket errors: connect 0, read 3, write 0, timeout 1"
            ["Socket", "errors:", rest @ ..] => {
                run.errors += rest
                    .iter()
                    .filter_map(|x| x.trim_end_matches(',').parse::<u64>().ok())
                    .sum::<u64>();
            }
            ["Non-2xx", "or", "3xx", "responses:", n] => run.errors += n.parse::<u64>().ok()?,
            _ => {}
        }
    }
    run.value = rps?;
    run.ops = ops?;
    run.secs = secs?;
    Some(run)
}

/// h2load's summary: `finished in 2.00s, 38504.50 req/s, …` and the `requests:` and
/// `status codes:` lines (failed, errored, timed out and non-2xx count as errors).
pub fn h2load(text: &str) -> Option<Run> {
    let mut run = Run::default();
    let (mut rps, mut secs, mut done) = (None, None, None);
    for line in text.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("finished in ") {
            let mut parts = rest.split(", ");
            secs = parts.next().and_then(h2load_secs);
            rps = parts
                .next()
                .and_then(|p| p.strip_suffix(" req/s"))
                .and_then(|v| v.parse().ok());
        } else if let Some(rest) = line.strip_prefix("requests: ") {
            for part in rest.split(", ") {
                let mut w = part.split_whitespace();
                let (Some(n), Some(kind)) = (w.next(), w.next()) else {
                    continue;
                };
                let n: u64 = n.parse().ok()?;
                match kind {
                    "succeeded" => done = Some(n),
                    "failed" | "errored" | "timeout" => run.errors += n,
                    _ => {}
                }
            }
        } else if let Some(rest) = line.strip_prefix("status codes: ") {
            for part in rest.split(", ") {
                let mut w = part.split_whitespace();
                if let (Some(n), Some(class)) = (w.next(), w.next())
                    && class != "2xx"
                {
                    run.errors += n.parse::<u64>().ok()?;
                }
            }
        }
    }
    run.value = rps?;
    run.secs = secs?;
    run.ops = done? as f64;
    Some(run)
}

/// `2.00s`, `1m3.5s`, `500.12ms` (h2load prints its own units).
fn h2load_secs(s: &str) -> Option<f64> {
    if let Some(ms) = s.strip_suffix("ms") {
        return ms.parse::<f64>().ok().map(|v| v / 1000.0);
    }
    let s = s.strip_suffix('s')?;
    match s.split_once('m') {
        Some((m, rest)) => Some(m.parse::<f64>().ok()? * 60.0 + rest.parse::<f64>().ok()?),
        None => s.parse().ok(),
    }
}

/// iperf3's text summary: the receiver's bitrate (the `[SUM]` line when there are several
/// streams), in Mbit/s; `ops` is the megabytes received.
pub fn iperf3(text: &str) -> Option<Run> {
    let line = text
        .lines()
        .map(str::trim)
        .filter(|l| l.ends_with("receiver"))
        .find(|l| l.starts_with("[SUM]"))
        .or_else(|| {
            text.lines()
                .map(str::trim)
                .find(|l| l.ends_with("receiver"))
        })?;
    let w: Vec<&str> = line.split_whitespace().collect();
    let at = w.iter().position(|x| x.ends_with("bits/sec"))?;
    let rate: f64 = w.get(at.checked_sub(1)?)?.parse().ok()?;
    let mbits = rate
        * match *w.get(at)? {
            "bits/sec" => 1e-6,
            "Kbits/sec" => 1e-3,
            "Mbits/sec" => 1.0,
            "Gbits/sec" => 1e3,
            "Tbits/sec" => 1e6,
            _ => return None,
        };
    // "0.00-1.02   sec": the interval ends where the transfer starts.
    let interval = w.iter().find(|x| x.contains('-') && x.contains('.'))?;
    let secs: f64 = interval.split_once('-')?.1.parse().ok()?;
    Some(Run {
        value: mbits,
        ops: mbits * secs / 8.0,
        secs,
        ..Run::default()
    })
}

/// The result line of a `bench-load` client: `ops=120 secs=1.000 errors=0 p50_us=…`.
pub fn load_line(text: &str) -> Option<Run> {
    let line = text.lines().rev().find(|l| l.starts_with("ops="))?;
    let mut run = Run::default();
    let (mut ops, mut secs) = (None, None);
    for word in line.split_whitespace() {
        let (k, v) = word.split_once('=')?;
        let us = |v: &str| v.parse::<f64>().ok().map(|u| u / 1000.0);
        match k {
            "ops" => ops = v.parse::<f64>().ok(),
            "secs" => secs = v.parse::<f64>().ok(),
            "errors" => run.errors = v.parse().ok()?,
            "p50_us" => run.p50_ms = us(v),
            "p99_us" => run.p99_ms = us(v),
            "p999_us" => run.p999_ms = us(v),
            _ => {}
        }
    }
    run.ops = ops?;
    run.secs = secs.filter(|s| *s > 0.0)?;
    run.value = run.ops / run.secs;
    Some(run)
}

#[cfg(test)]
mod tests {
    use super::*;

    const WRK: &str = "Running 10s test @ http://127.0.0.1:8080/
  1 threads and 50 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   620.53us  101.00us   5.00ms   90.00%
    Req/Sec    80.64k     3.21k   85.36k    73.00%
  Latency Distribution
     50%  591.00us
     75%  650.00us
     90%  700.00us
     99%    1.03ms
  802532 requests in 10.00s, 95.66MB read
  Socket errors: connect 0, read 3, write 0, timeout 1
  Non-2xx or 3xx responses: 12
Requests/sec:  80240.66
Transfer/sec:      9.56MB
";

    #[test]
    fn wrk_output() {
        let r = wrk(WRK).unwrap();
        assert_eq!(r.value, 80240.66);
        assert_eq!(r.ops, 802532.0);
        assert_eq!(r.secs, 10.0);
        assert_eq!(r.errors, 16);
        assert!((r.p50_ms.unwrap() - 0.591).abs() < 1e-9);
        assert!((r.p99_ms.unwrap() - 1.03).abs() < 1e-9);
        assert_eq!(wrk("garbage"), None);
        // No summary line: unreadable, not zero.
        assert_eq!(wrk(&WRK.replace("Requests/sec:  80240.66", "")), None);
    }

    #[test]
    fn wrk_units() {
        assert_eq!(wrk_ms("2.00s"), Some(2000.0));
        assert_eq!(wrk_ms("1.5m"), Some(90_000.0));
        assert_eq!(wrk_ms("12"), None);
        assert_eq!(wrk_ms("3.0xs"), None);
    }

    const H2LOAD: &str = "starting benchmark...
spawning thread #0: 10 total client(s). Timing-based test with 0s of warm-up time and 2s of main duration for each client.
Application protocol: h2

finished in 2.00s, 38504.50 req/s, 1.36MB/s
requests: 77009 total, 77109 started, 77009 done, 77000 succeeded, 9 failed, 2 errored, 1 timeout
status codes: 77000 2xx, 0 3xx, 4 4xx, 5 5xx
traffic: 2.72MB (2851260) total, 1.10MB (1155135) headers (space savings 93.25%), 150.41KB (154018) data
                     min         max         mean         sd        +/- sd
time for request:      121us     12.45ms      2.52ms       1.01ms    71.22%
";

    #[test]
    fn h2load_output() {
        let r = h2load(H2LOAD).unwrap();
        assert_eq!(r.value, 38504.5);
        assert_eq!(r.secs, 2.0);
        assert_eq!(r.ops, 77000.0);
        assert_eq!(r.errors, 9 + 2 + 1 + 4 + 5);
        assert_eq!(h2load("no summary"), None);
        assert_eq!(h2load_secs("1m3.5s"), Some(63.5));
        assert_eq!(h2load_secs("500ms"), Some(0.5));
        assert_eq!(h2load_secs("2.00"), None);
    }

    const IPERF_ONE: &str = "[ ID] Interval           Transfer     Bitrate         Retr
[  5]   0.00-1.00   sec  1.62 GBytes  13.9 Gbits/sec    5             sender
[  5]   0.00-1.01   sec  1.62 GBytes  13.8 Gbits/sec                  receiver

iperf Done.
";

    const IPERF_SUM: &str =
        "[  7]   0.00-1.01   sec  1.28 GBytes  10936 Mbits/sec    0             sender
[  7]   0.00-1.02   sec  1.28 GBytes  10785 Mbits/sec                  receiver
[SUM]   0.00-1.01   sec  2.56 GBytes  21872 Mbits/sec    0             sender
[SUM]   0.00-1.02   sec  2.56 GBytes  21569 Mbits/sec                  receiver
";

    #[test]
    fn iperf3_output() {
        let r = iperf3(IPERF_ONE).unwrap();
        assert!((r.value - 13_800.0).abs() < 1e-6);
        assert_eq!(r.secs, 1.01);
        assert!((r.ops - 13_800.0 * 1.01 / 8.0).abs() < 1e-6);
        let r = iperf3(IPERF_SUM).unwrap();
        assert_eq!(r.value, 21569.0);
        assert_eq!(r.secs, 1.02);
        assert_eq!(iperf3("iperf3: error - unable to connect to server"), None);
    }

    #[test]
    fn load_lines() {
        let r =
            load_line("warming\nops=2000 secs=2.000 errors=3 p50_us=150 p99_us=900 p999_us=2500\n")
                .unwrap();
        assert_eq!(r.value, 1000.0);
        assert_eq!(r.ops, 2000.0);
        assert_eq!(r.errors, 3);
        assert_eq!(r.p50_ms, Some(0.15));
        assert_eq!(r.p99_ms, Some(0.9));
        assert_eq!(r.p999_ms, Some(2.5));
        assert_eq!(load_line("ops=10 secs=0 errors=0"), None);
        assert_eq!(load_line("error: connection refused"), None);
    }
}
