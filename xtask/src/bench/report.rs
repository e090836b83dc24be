//! The bench's results and their three renderings: a markdown table, JSON, an SVG chart of the
//! ratios to HAProxy. Pure: the caller passes everything in (including the date).

use std::fmt::Write as _;

/// Which way is better for a metric; ratios are oriented so that > 1 always means "better than
/// the baseline".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Better {
    Higher,
    Lower,
}

/// The repetitions of one measurement.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Stat {
    pub samples: Vec<f64>,
    /// Failed operations summed over the repetitions.
    pub errors: u64,
}

impl Stat {
    pub fn median(&self) -> Option<f64> {
        let mut s = self.samples.clone();
        s.sort_by(f64::total_cmp);
        let n = s.len();
        match n {
            0 => None,
            _ if n % 2 == 1 => s.get(n / 2).copied(),
            _ => Some((s.get(n / 2 - 1)? + s.get(n / 2)?) / 2.0),
        }
    }

    /// (max − min) / median, in percent: the spread of the repetitions.
    pub fn spread_pct(&self) -> Option<f64> {
        let m = self.median().filter(|m| *m > 0.0)?;
        let min = self.samples.iter().copied().reduce(f64::min)?;
        let max = self.samples.iter().copied().reduce(f64::max)?;
        Some((max - min) / m * 100.0)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    Value(Stat),
    Skipped(String),
    /// The workload has no meaning for this target (direct memory per proxied connection).
    NotApplicable,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The `--only` name of the workload that produced the row.
    pub workload: String,
    pub title: String,
    pub metric: String,
    pub better: Better,
    /// One per target, in [`Report::targets`] order.
    pub cells: Vec<Cell>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// Stable id (`direct`, `haproxy`, `portcullis-uring`, …) used in JSON.
    pub id: String,
    /// Shown in the table (with the version when known).
    pub label: String,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Report {
    pub date: String,
    pub command: String,
    pub machine: String,
    pub method: Vec<String>,
    pub quick: bool,
    pub targets: Vec<Target>,
    pub rows: Vec<Row>,
}

pub const HAPROXY: &str = "haproxy";
pub const NGINX: &str = "nginx";
pub const DIRECT: &str = "direct";
/// The current build (io_uring), which a `--baseline` column is compared with.
pub const CURRENT: &str = "portcullis-uring";
/// The `--baseline` build's column.
pub const BASELINE: &str = "portcullis-baseline-uring";

impl Report {
    fn index(&self, id: &str) -> Option<usize> {
        self.targets.iter().position(|t| t.id == id)
    }

    /// Whether the `n`th column is the `--baseline` build's.
    fn is_baseline(&self, n: usize) -> bool {
        self.targets.get(n).is_some_and(|t| t.id == BASELINE)
    }

    /// The cell's median relative to the `base` target's, oriented by the row (> 1 = better).
    pub fn ratio(&self, row: &Row, cell: &Cell, base: &str) -> Option<f64> {
        let b = match row.cells.get(self.index(base)?)? {
            Cell::Value(s) => s.median()?,
            _ => return None,
        };
        let v = match cell {
            Cell::Value(s) => s.median()?,
            _ => return None,
        };
        match row.better {
            Better::Higher if b > 0.0 => Some(v / b),
            Better::Lower if v > 0.0 => Some(b / v),
            // Both at zero (no failed requests either side): equal.
            Better::Lower if b == 0.0 && v == 0.0 => Some(1.0),
            // Zero against a positive baseline: better by no finite factor.
            Better::Lower if v == 0.0 && b > 0.0 => Some(f64::INFINITY),
            _ => None,
        }
    }

    /// The better of HAProxy and nginx on this row (by median, oriented), if either ran.
    pub fn best_peer(&self, row: &Row) -> Option<&Target> {
        let median = |id: &str| match row.cells.get(self.index(id)?)? {
            Cell::Value(s) => s.median(),
            _ => None,
        };
        let better = |a: f64, b: f64| match row.better {
            Better::Higher => a > b,
            Better::Lower => a < b,
        };
        let pick = match (median(HAPROXY), median(NGINX)) {
            (Some(h), Some(n)) => Some(if better(n, h) { NGINX } else { HAPROXY }),
            (Some(_), None) => Some(HAPROXY),
            (None, Some(_)) => Some(NGINX),
            (None, None) => None,
        }?;
        self.targets.get(self.index(pick)?)
    }
}

/// `80,240` / `41.3` / `0.62` / `0`: enough digits to compare, no more.
pub fn number(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v.abs() >= 1000.0 {
        let s = format!("{:.0}", v.abs());
        let mut out = String::new();
        for (i, c) in s.chars().enumerate() {
            if i > 0 && (s.len() - i) % 3 == 0 {
                out.push(',');
            }
            out.push(c);
        }
        if v < 0.0 { format!("-{out}") } else { out }
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn ratio_text(r: Option<f64>) -> String {
    match r {
        None => "–".into(),
        Some(r) if r.is_infinite() => "∞".into(),
        Some(r) => format!("{r:.2}×"),
    }
}

pub fn markdown(r: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# portcullis bench{}\n",
        if r.quick {
            " (--quick: smoke run, not for judging speed)"
        } else {
            ""
        }
    );
    let _ = writeln!(out, "- date: {}", r.date);
    let _ = writeln!(out, "- command: `{}`", r.command);
    let _ = writeln!(out, "- machine: {}", r.machine);
    for m in &r.method {
        let _ = writeln!(out, "- {m}");
    }
    out.push_str(
        "\nEach cell: median of the repetitions ± spread ((max − min) / median), then the ratio to \
         HAProxy (H), to nginx (N) and to direct (D). Ratios are oriented so that > 1 is better \
         (for ↓ metrics the ratio is baseline / value). The last column names the better of \
         HAProxy and nginx on the row.",
    );
    if let Some(b) = r.index(BASELINE).and_then(|i| r.targets.get(i)) {
        let _ = write!(
            out,
            " The {} column is an earlier build started exactly like portcullis uring; its cells \
             add its ratio to the current build, portcullis uring (C): < 1 means the current \
             build is better.",
            b.label
        );
    }
    out.push_str("\n\n");
    out.push_str("| workload | metric |");
    for t in &r.targets {
        let _ = write!(out, " {} |", t.label);
    }
    out.push_str(" best peer |\n|---|---|");
    for _ in &r.targets {
        out.push_str("---:|");
    }
    out.push_str("---|\n");
    // Skip reasons are long and repeat down a column: numbered notes under the table.
    let mut notes: Vec<&str> = Vec::new();
    for row in &r.rows {
        let arrow = match row.better {
            _ if row.metric == "–" => "",
            Better::Higher => " ↑",
            Better::Lower => " ↓",
        };
        let _ = write!(out, "| {} | {}{arrow} |", row.title, row.metric);
        for (n, cell) in row.cells.iter().enumerate() {
            let text = match cell {
                Cell::Value(s) => match s.median() {
                    Some(m) => {
                        let mut t = number(m);
                        if let Some(sp) = s.spread_pct().filter(|_| s.samples.len() > 1) {
                            let _ = write!(t, " ±{sp:.0}%");
                        }
                        let _ = write!(
                            t,
                            "<br>{} H · {} N · {} D",
                            ratio_text(r.ratio(row, cell, HAPROXY)),
                            ratio_text(r.ratio(row, cell, NGINX)),
                            ratio_text(r.ratio(row, cell, DIRECT))
                        );
                        if r.is_baseline(n) {
                            let _ = write!(t, " · {} C", ratio_text(r.ratio(row, cell, CURRENT)));
                        }
                        if s.errors > 0 {
                            let _ = write!(t, "<br>⚠ {} errors", s.errors);
                        }
                        t
                    }
                    None => "no data".into(),
                },
                Cell::Skipped(why) => {
                    let n = match notes.iter().position(|w| w == why) {
                        Some(n) => n + 1,
                        None => {
                            notes.push(why);
                            notes.len()
                        }
                    };
                    format!("skipped [{n}]")
                }
                Cell::NotApplicable => "n/a".into(),
            };
            let _ = write!(out, " {text} |");
        }
        let best = r.best_peer(row).map_or("–", |t| t.label.as_str());
        let _ = writeln!(out, " {best} |");
    }
    if !notes.is_empty() {
        out.push('\n');
        for (i, why) in notes.iter().enumerate() {
            let _ = writeln!(out, "[{}] {}  ", i + 1, why.replace('\n', " "));
        }
    }
    out
}

fn json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn json_num(v: Option<f64>) -> String {
    match v {
        Some(v) if v.is_finite() => format!("{}", (v * 1e4).round() / 1e4),
        _ => "null".into(),
    }
}

pub fn json(r: &Report) -> String {
    let mut out = String::from("{\n");
    let _ = writeln!(out, "  \"date\": {},", json_str(&r.date));
    let _ = writeln!(out, "  \"command\": {},", json_str(&r.command));
    let _ = writeln!(out, "  \"machine\": {},", json_str(&r.machine));
    let _ = writeln!(out, "  \"quick\": {},", r.quick);
    let method: Vec<String> = r.method.iter().map(|m| json_str(m)).collect();
    let _ = writeln!(out, "  \"method\": [{}],", method.join(", "));
    let targets: Vec<String> = r
        .targets
        .iter()
        .map(|t| {
            format!(
                "{{\"id\": {}, \"label\": {}}}",
                json_str(&t.id),
                json_str(&t.label)
            )
        })
        .collect();
    let _ = writeln!(out, "  \"targets\": [{}],", targets.join(", "));
    out.push_str("  \"rows\": [\n");
    for (i, row) in r.rows.iter().enumerate() {
        let better = match row.better {
            Better::Higher => "higher",
            Better::Lower => "lower",
        };
        let _ = writeln!(
            out,
            "    {{\"workload\": {}, \"title\": {}, \"metric\": {}, \"better\": \"{better}\", \"cells\": {{",
            json_str(&row.workload),
            json_str(&row.title),
            json_str(&row.metric)
        );
        let cells: Vec<String> = r
            .targets
            .iter()
            .zip(&row.cells)
            .enumerate()
            .map(|(n, (t, c))| {
                let body = match c {
                    Cell::Value(s) => {
                        let samples: Vec<String> =
                            s.samples.iter().map(|v| json_num(Some(*v))).collect();
                        let vs_current = if r.is_baseline(n) {
                            format!(", \"vs_current\": {}", json_num(r.ratio(row, c, CURRENT)))
                        } else {
                            String::new()
                        };
                        format!(
                            "{{\"median\": {}, \"spread_pct\": {}, \"samples\": [{}], \"errors\": {}, \"vs_haproxy\": {}, \"vs_nginx\": {}, \"vs_direct\": {}{vs_current}}}",
                            json_num(s.median()),
                            json_num(s.spread_pct()),
                            samples.join(", "),
                            s.errors,
                            json_num(r.ratio(row, c, HAPROXY)),
                            json_num(r.ratio(row, c, NGINX)),
                            json_num(r.ratio(row, c, DIRECT))
                        )
                    }
                    Cell::Skipped(why) => format!("{{\"skipped\": {}}}", json_str(why)),
                    Cell::NotApplicable => "null".into(),
                };
                format!("      {}: {body}", json_str(&t.id))
            })
            .collect();
        out.push_str(&cells.join(",\n"));
        let _ = writeln!(
            out,
            "\n    }}}}{}",
            if i + 1 < r.rows.len() { "," } else { "" }
        );
    }
    out.push_str("  ]\n}\n");
    out
}

fn xml(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const COLORS: &[&str] = &[
    "#7f7f7f", "#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
];

/// The axis ends here; a longer bar is cut (its label still gives the value).
const MAX_RATIO: f64 = 4.0;

/// Horizontal bars: for every row with a HAProxy value, each other target's ratio to HAProxy
/// (> 1 = better), with the HAProxy line at 1.
pub fn svg(r: &Report) -> String {
    let Some(h) = r.index(HAPROXY) else {
        return String::from("<svg xmlns=\"http://www.w3.org/2000/svg\"/>\n");
    };
    let others: Vec<usize> = (0..r.targets.len()).filter(|i| *i != h).collect();
    let rows: Vec<(&Row, Vec<Option<f64>>)> = r
        .rows
        .iter()
        .map(|row| {
            let ratios = others
                .iter()
                .map(|i| row.cells.get(*i).and_then(|c| r.ratio(row, c, HAPROXY)))
                .collect();
            (row, ratios)
        })
        .filter(|(_, ratios): &(&Row, Vec<Option<f64>>)| ratios.iter().any(Option::is_some))
        .collect();
    let max = rows
        .iter()
        .flat_map(|(_, v)| v.iter().flatten().copied())
        .fold(2.0f64, f64::max)
        .min(MAX_RATIO)
        .ceil();
    let (label_w, plot_w, bar_h, gap) = (400.0, 520.0, 9.0, 10.0);
    let width = label_w + plot_w + 80.0;
    // The legend: 150 px an entry, wrapped to the width (a --baseline makes seven).
    let (entry_w, legend_h) = (150.0, 14.0);
    let per_line = (((width - 10.0) / entry_w) as usize).max(1);
    let legend_lines = others.len().div_ceil(per_line).max(1);
    let top = 46.0 + legend_h * legend_lines as f64;
    let group_h = bar_h * others.len() as f64 + gap;
    let height = top + group_h * rows.len() as f64 + 40.0;
    let x = |v: f64| label_w + v.min(max) / max * plot_w;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" font-family=\"sans-serif\" font-size=\"11\">"
    );
    let _ = writeln!(out, "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>");
    let _ = writeln!(
        out,
        "<text x=\"10\" y=\"18\" font-size=\"14\">Ratio to {} (&gt; 1 = better){}</text>",
        xml(&r.targets.get(h).map_or(String::new(), |t| t.label.clone())),
        if r.quick {
            " — --quick smoke run"
        } else {
            ""
        }
    );
    for (k, i) in others.iter().enumerate() {
        let lx = 10.0 + (k % per_line) as f64 * entry_w;
        let ly = 30.0 + (k / per_line) as f64 * legend_h;
        let color = COLORS.get(*i % COLORS.len()).unwrap_or(&"#000");
        let label = r.targets.get(*i).map_or("", |t| t.label.as_str());
        let _ = writeln!(
            out,
            "<rect x=\"{lx}\" y=\"{ly}\" width=\"10\" height=\"10\" fill=\"{color}\"/><text x=\"{}\" y=\"{}\">{}</text>",
            lx + 14.0,
            ly + 9.0,
            xml(label)
        );
    }
    let bottom = height - 30.0;
    let mut tick = 0.0;
    while tick <= max {
        let _ = writeln!(
            out,
            "<line x1=\"{0}\" y1=\"{top}\" x2=\"{0}\" y2=\"{bottom}\" stroke=\"{1}\" stroke-width=\"{2}\"/><text x=\"{0}\" y=\"{3}\" text-anchor=\"middle\">{tick}×</text>",
            x(tick),
            if tick == 1.0 { "#000" } else { "#ddd" },
            if tick == 1.0 { 1.5 } else { 1.0 },
            bottom + 14.0
        );
        tick += if max > 4.0 { 1.0 } else { 0.5 };
    }
    for (g, (row, ratios)) in rows.iter().enumerate() {
        let y0 = top + g as f64 * group_h;
        let _ = writeln!(
            out,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{} — {}</text>",
            label_w - 6.0,
            y0 + group_h / 2.0,
            xml(&row.title),
            xml(&row.metric)
        );
        for (k, ratio) in ratios.iter().enumerate() {
            let Some(v) = ratio else { continue };
            let i = others.get(k).copied().unwrap_or(0);
            let color = COLORS.get(i % COLORS.len()).unwrap_or(&"#000");
            let y = y0 + k as f64 * bar_h;
            let shown = if v.is_infinite() {
                "∞".into()
            } else {
                format!("{v:.2}")
            };
            let _ = writeln!(
                out,
                "<rect x=\"{label_w}\" y=\"{y}\" width=\"{:.1}\" height=\"{}\" fill=\"{color}\"/><text x=\"{:.1}\" y=\"{}\" font-size=\"9\">{shown}</text>",
                x(*v) - label_w,
                bar_h - 1.0,
                x(*v) + 3.0,
                y + bar_h - 2.0
            );
        }
    }
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(samples: &[f64]) -> Cell {
        Cell::Value(Stat {
            samples: samples.to_vec(),
            errors: 0,
        })
    }

    fn report() -> Report {
        let t = |id: &str, label: &str| Target {
            id: id.into(),
            label: label.into(),
        };
        Report {
            date: "2025-01-01 00:00 UTC".into(),
            command: "cargo xtask bench".into(),
            machine: "2 cores".into(),
            method: vec!["3 repetitions".into()],
            quick: false,
            targets: vec![
                t("direct", "direct"),
                t("haproxy", "haproxy 2.6.12"),
                t("portcullis-uring", "portcullis uring"),
                t("nginx", "nginx 1.22.1"),
            ],
            rows: vec![
                Row {
                    workload: "http-ka".into(),
                    title: "HTTP/1.1 keep-alive".into(),
                    metric: "req/s".into(),
                    better: Better::Higher,
                    cells: vec![
                        stat(&[100_000.0, 90_000.0, 110_000.0]),
                        stat(&[50_000.0, 50_000.0, 50_000.0]),
                        Cell::Value(Stat {
                            samples: vec![80_000.0, 76_000.0, 84_000.0],
                            errors: 2,
                        }),
                        stat(&[62_500.0]),
                    ],
                },
                Row {
                    workload: "memory".into(),
                    title: "10k idle connections".into(),
                    metric: "KiB/conn".into(),
                    better: Better::Lower,
                    cells: vec![
                        Cell::NotApplicable,
                        stat(&[4.0]),
                        Cell::Skipped("exited at start".into()),
                        stat(&[8.0]),
                    ],
                },
            ],
        }
    }

    #[test]
    fn stats() {
        let s = Stat {
            samples: vec![3.0, 1.0, 2.0, 10.0],
            errors: 0,
        };
        assert_eq!(s.median(), Some(2.5));
        assert_eq!(s.spread_pct(), Some(360.0));
        assert_eq!(Stat::default().median(), None);
    }

    #[test]
    fn ratios_are_oriented() {
        let r = report();
        let row = &r.rows[0];
        assert_eq!(r.ratio(row, &row.cells[2], HAPROXY), Some(1.6));
        assert_eq!(r.ratio(row, &row.cells[2], DIRECT), Some(0.8));
        let mem = &r.rows[1];
        assert_eq!(r.ratio(mem, &stat(&[2.0]), HAPROXY), Some(2.0));
        assert_eq!(r.ratio(mem, &mem.cells[1], DIRECT), None);
    }

    #[test]
    fn zero_failures_compare_sanely() {
        let r = report();
        let row = Row {
            workload: "reload".into(),
            title: "Reload under load".into(),
            metric: "failed requests".into(),
            better: Better::Lower,
            cells: vec![
                Cell::NotApplicable,
                stat(&[0.0]),
                stat(&[0.0, 0.0, 0.0]),
                Cell::Skipped("no reload".into()),
            ],
        };
        assert_eq!(r.ratio(&row, &row.cells[2], HAPROXY), Some(1.0));
        assert_eq!(r.ratio(&row, &stat(&[3.0]), HAPROXY), Some(0.0));
        let fewer = Row {
            cells: vec![
                Cell::NotApplicable,
                stat(&[6.0]),
                stat(&[0.0]),
                Cell::Skipped("no reload".into()),
            ],
            ..row.clone()
        };
        assert_eq!(
            r.ratio(&fewer, &fewer.cells[2], HAPROXY),
            Some(f64::INFINITY)
        );
        let md = markdown(&Report {
            rows: vec![row, fewer],
            ..report()
        });
        assert!(md.contains(
            "| Reload under load | failed requests ↓ | n/a | 0<br>1.00× H · – N · – D | 0<br>1.00× H · – N · – D | skipped [1] | haproxy 2.6.12 |"
        ));
        assert!(md.contains(
            "| Reload under load | failed requests ↓ | n/a | 6.00<br>1.00× H · – N · – D | 0<br>∞ H · – N · – D | skipped [1] | haproxy 2.6.12 |"
        ));
        // JSON has no infinity: null.
        assert_eq!(json_num(Some(f64::INFINITY)), "null");
    }

    #[test]
    fn numbers() {
        assert_eq!(number(1234567.4), "1,234,567");
        assert_eq!(number(999.94), "999.9");
        assert_eq!(number(1.234), "1.23");
        assert_eq!(number(-12345.0), "-12,345");
        assert_eq!(number(0.0), "0");
        assert_eq!(number(0.004), "0.00");
    }

    #[test]
    fn markdown_table() {
        let md = markdown(&report());
        let lines: Vec<&str> = md.lines().collect();
        assert!(lines.contains(&"- command: `cargo xtask bench`"));
        assert!(
            lines.contains(&"| workload | metric | direct | haproxy 2.6.12 | portcullis uring | nginx 1.22.1 | best peer |")
        );
        assert!(lines.contains(&"|---|---|---:|---:|---:|---:|---|"));
        assert!(lines.contains(&"| HTTP/1.1 keep-alive | req/s ↑ | 100,000 ±20%<br>2.00× H · 1.60× N · 1.00× D | 50,000 ±0%<br>1.00× H · 0.80× N · 0.50× D | 80,000 ±10%<br>1.60× H · 1.28× N · 0.80× D<br>⚠ 2 errors | 62,500<br>1.25× H · 1.00× N · 0.62× D | nginx 1.22.1 |"));
        assert!(lines.contains(
            &"| 10k idle connections | KiB/conn ↓ | n/a | 4.00<br>1.00× H · 2.00× N · – D | skipped [1] | 8.00<br>0.50× H · 1.00× N · – D | haproxy 2.6.12 |"
        ));
        assert_eq!(lines.last(), Some(&"[1] exited at start  "));
    }

    #[test]
    fn json_document() {
        let j = json(&report());
        assert!(j.contains("\"targets\": [{\"id\": \"direct\", \"label\": \"direct\"}, {\"id\": \"haproxy\", \"label\": \"haproxy 2.6.12\"}"));
        assert!(j.contains("\"portcullis-uring\": {\"median\": 80000, \"spread_pct\": 10, \"samples\": [80000, 76000, 84000], \"errors\": 2, \"vs_haproxy\": 1.6, \"vs_nginx\": 1.28, \"vs_direct\": 0.8}"));
        assert!(j.contains("\"direct\": null"));
        assert!(j.contains("\"portcullis-uring\": {\"skipped\": \"exited at start\"}"));
        assert_eq!(json_str("a\"b\\\n\u{1}"), "\"a\\\"b\\\\\\n\\u0001\"");
        // Balanced braces: a cheap well-formedness check without a JSON parser.
        assert_eq!(j.matches('{').count(), j.matches('}').count());
        assert_eq!(j.matches('[').count(), j.matches(']').count());
    }

    /// [`report`] with a `--baseline` column beside portcullis uring.
    fn with_baseline() -> Report {
        let mut r = report();
        r.targets.insert(
            3,
            Target {
                id: BASELINE.into(),
                label: "portcullis before uring".into(),
            },
        );
        r.rows[0].cells.insert(3, stat(&[72_000.0]));
        r.rows[1].cells.insert(3, stat(&[5.0]));
        r
    }

    #[test]
    fn a_baseline_column_has_its_ratio_to_the_current_build() {
        let r = with_baseline();
        let md = markdown(&r);
        let lines: Vec<&str> = md.lines().collect();
        assert!(lines.contains(&"| workload | metric | direct | haproxy 2.6.12 | portcullis uring | portcullis before uring | nginx 1.22.1 | best peer |"));
        assert!(md.contains("The portcullis before uring column is an earlier build"));
        // Only the baseline's cells have a C ratio: 72,000 against the current 80,000.
        assert!(lines.contains(&"| HTTP/1.1 keep-alive | req/s ↑ | 100,000 ±20%<br>2.00× H · 1.60× N · 1.00× D | 50,000 ±0%<br>1.00× H · 0.80× N · 0.50× D | 80,000 ±10%<br>1.60× H · 1.28× N · 0.80× D<br>⚠ 2 errors | 72,000<br>1.44× H · 1.15× N · 0.72× D · 0.90× C | 62,500<br>1.25× H · 1.00× N · 0.62× D | nginx 1.22.1 |"));
        // The current build skipped: no ratio.
        assert!(lines.contains(&"| 10k idle connections | KiB/conn ↓ | n/a | 4.00<br>1.00× H · 2.00× N · – D | skipped [1] | 5.00<br>0.80× H · 1.60× N · – D · – C | 8.00<br>0.50× H · 1.00× N · – D | haproxy 2.6.12 |"));
        assert!(!markdown(&report()).contains(" C |"));
        assert!(!markdown(&report()).contains("earlier build"));

        let j = json(&r);
        assert!(j.contains("\"portcullis-baseline-uring\": {\"median\": 72000, \"spread_pct\": 0, \"samples\": [72000], \"errors\": 0, \"vs_haproxy\": 1.44, \"vs_nginx\": 1.152, \"vs_direct\": 0.72, \"vs_current\": 0.9}"));
        assert!(j.contains("\"vs_current\": null}"));
        assert_eq!(j.matches("vs_current").count(), 2);

        // Seven targets beside HAProxy: the legend wraps onto a second line.
        let mut seven = with_baseline();
        for (id, label) in [("a", "a"), ("b", "b"), ("c", "c")] {
            seven.targets.push(Target {
                id: id.into(),
                label: label.into(),
            });
        }
        let s = svg(&seven);
        assert!(s.contains(">portcullis before uring</text>"));
        assert!(s.contains("<text x=\"24\" y=\"53\">"), "{s}");
        assert!(!svg(&report()).contains(" y=\"53\">"));
    }

    #[test]
    fn svg_chart() {
        let s = svg(&report());
        assert!(s.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(s.ends_with("</svg>\n"));
        // A row is drawn when some target besides HAProxy has a ratio (here nginx's).
        assert!(s.contains(">HTTP/1.1 keep-alive — req/s</text>"));
        assert!(s.contains("10k idle connections"));
        assert!(s.contains(">1.60</text>"));
        assert!(s.contains(">2.00</text>"));
        assert!(s.contains(">Ratio to haproxy 2.6.12 (&gt; 1 = better)</text>"));
    }
}
