//! A sweep's plot: per system, the rate of each anomaly kind (0..1) against
//! the varied value, one line per kind with its 95 % interval as error
//! bars, one lease marked, the 50 % line and a found boundary's bracket
//! shaded. Static SVG, no script.

use super::html::esc;
use super::plots::COLORS;
use super::svg::{fmt_num, nice_step};
use super::sweep::{Found, Sweep, SystemSweep};
use super::trials::{kind_label, ANY};
use std::fmt::Write as _;

const W: f64 = 760.0;
const H: f64 = 340.0;
const L: f64 = 56.0;
const R: f64 = 16.0;
const T: f64 = 44.0;
const B: f64 = 48.0;

struct Scale {
    x0: f64,
    x1: f64,
}

impl Scale {
    fn x(&self, v: f64) -> f64 {
        L + (W - L - R) * ((v - self.x0) / (self.x1 - self.x0)).clamp(0.0, 1.0)
    }
    fn y(&self, r: f64) -> f64 {
        H - B - (H - T - B) * r.clamp(0.0, 1.0)
    }
}

fn scale(s: &Sweep, sys: &SystemSweep) -> Scale {
    let xs = sys.rows.iter().map(|r| r.value).chain(s.axis.lease_mark());
    let (lo, hi) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
        (a.min(v), b.max(v))
    });
    let (lo, hi) = if lo.is_finite() { (lo, hi) } else { (0.0, 1.0) };
    let pad = ((hi - lo) * 0.05).max(if hi == lo { 0.5 } else { 0.0 });
    Scale {
        x0: lo - pad,
        x1: hi + pad,
    }
}

fn axes(h: &mut String, s: &Sweep, sc: &Scale) {
    for r in [0.0, 0.25, 0.5, 0.75, 1.0] {
        let y = sc.y(r);
        let class = if r == 0.5 { "half" } else { "grid" };
        let _ = write!(
            h,
            r##"<line class="{class}" x1="{L}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}" stroke="{}"/><text class="tk" x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            W - R,
            if r == 0.5 { "#98a2b3" } else { "#eaecf0" },
            L - 4.0,
            y + 4.0,
            fmt_num(r)
        );
    }
    let step = nice_step(sc.x1 - sc.x0, 8.0);
    let mut x = (sc.x0 / step).ceil() * step;
    while x <= sc.x1 + 1e-9 {
        let _ = write!(
            h,
            r#"<text class="tk" x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            sc.x(x),
            H - B + 16.0,
            fmt_num((x / step).round() * step)
        );
        x += step;
    }
    let _ = write!(
        h,
        r##"<line class="axis" x1="{L}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="#667085"/><line class="axis" x1="{L}" x2="{L}" y1="{T}" y2="{:.1}" stroke="#667085"/><text class="xl" x="{:.1}" y="{:.1}" text-anchor="middle">{}</text><text class="yl" transform="translate(14 {:.1}) rotate(-90)" text-anchor="middle">rate per landed injection</text>"##,
        W - R,
        H - B,
        H - B,
        H - B,
        (L + W - R) / 2.0,
        H - 10.0,
        esc(&s.axis.label()),
        (T + H - B) / 2.0
    );
}

fn marks(h: &mut String, s: &Sweep, sys: &SystemSweep, sc: &Scale) {
    if let Some(b) = &sys.boundary {
        let (lo, hi) = match b.found {
            Found::Bracket { lo, hi } | Found::Undecided { lo, hi, .. } => (lo, hi),
            _ => (f64::NAN, f64::NAN),
        };
        if lo.is_finite() {
            let (a, z) = (sc.x(lo), sc.x(hi));
            let _ = write!(
                h,
                r##"<rect class="bracket" x="{a:.1}" y="{T}" width="{:.1}" height="{:.1}" fill="#fef0c7"><title>50 % crossing: {}</title></rect>"##,
                (z - a).max(2.0),
                H - T - B,
                esc(&s.axis.span(lo, hi))
            );
        }
    }
    if let Some(m) = s.axis.lease_mark() {
        let x = sc.x(m);
        let _ = write!(
            h,
            r##"<line class="lease" x1="{x:.1}" x2="{x:.1}" y1="{T}" y2="{:.1}" stroke="#344054" stroke-dasharray="5 4"/><text class="tk" x="{:.1}" y="{:.1}">1 lease</text>"##,
            H - B,
            x + 3.0,
            T + 10.0
        );
    }
}

fn kind_lines(h: &mut String, s: &Sweep, sys: &SystemSweep, sc: &Scale) {
    let n = s.kinds.len() as f64;
    for (i, k) in s.kinds.iter().enumerate() {
        let (color, dash) = if k == ANY {
            ("#475467", r#" stroke-dasharray="4 3""#)
        } else {
            (COLORS[i % COLORS.len()], "")
        };
        // Spread the error bars of the kinds a little apart.
        let dx = (i as f64 - (n - 1.0) / 2.0) * 4.0;
        let mut d = String::new();
        let mut pen_up = true;
        for r in &sys.rows {
            let rate = &r.rates[k];
            let Some(p) = rate.rate() else {
                pen_up = true;
                continue;
            };
            let (x, y) = (sc.x(r.value) + dx, sc.y(p));
            let _ = write!(d, "{}{x:.1},{y:.1}", if pen_up { "M" } else { "L" });
            pen_up = false;
            let (ylo, yhi) = (sc.y(rate.lo), sc.y(rate.hi));
            let _ = write!(
                h,
                r#"<g class="bar" stroke="{color}"><line x1="{x:.1}" x2="{x:.1}" y1="{ylo:.1}" y2="{yhi:.1}"/><line x1="{:.1}" x2="{:.1}" y1="{ylo:.1}" y2="{ylo:.1}"/><line x1="{:.1}" x2="{:.1}" y1="{yhi:.1}" y2="{yhi:.1}"/></g><circle cx="{x:.1}" cy="{y:.1}" r="3" fill="{color}"><title>{}: {} at {}</title></circle>"#,
                x - 3.0,
                x + 3.0,
                x - 3.0,
                x + 3.0,
                esc(kind_label(k)),
                esc(&rate.text()),
                fmt_num(r.value)
            );
        }
        let _ = write!(
            h,
            r#"<path class="kind" data-kind="{}" d="{d}" fill="none" stroke="{color}" stroke-width="1.8"{dash}/>"#,
            esc(k)
        );
        let lx = L + 8.0 + 130.0 * i as f64;
        let _ = write!(
            h,
            r#"<line x1="{lx:.0}" x2="{:.0}" y1="30" y2="30" stroke="{color}" stroke-width="2"{dash}/><text class="tk" x="{:.0}" y="34">{}</text>"#,
            lx + 16.0,
            lx + 20.0,
            esc(kind_label(k))
        );
    }
}

/// The plot of one system's sweep as an inline `<svg>` element.
pub fn render(s: &Sweep, sys: &SystemSweep) -> String {
    let sc = scale(s, sys);
    let title = format!("{}: rate per landed injection", sys.system);
    let mut h = format!(
        r#"<svg class="chart sweep" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" role="img" aria-label="{t}" font-family="sans-serif" font-size="11"><text class="ct" x="{L}" y="16" font-size="13">{t}</text>"#,
        t = esc(&title)
    );
    marks(&mut h, s, sys, &sc);
    axes(&mut h, s, &sc);
    kind_lines(&mut h, s, sys, &sc);
    h.push_str("</svg>");
    h
}

#[cfg(test)]
mod tests {
    use super::super::sweep::{Axis, Row, Sweep, SystemSweep};
    use super::super::trials::{Rate, Tally};
    use super::*;

    #[test]
    fn the_plot_has_a_line_per_kind_error_bars_and_the_lease() {
        let row = |value, k| Row {
            value,
            tally: Tally {
                runs: 2,
                landed: 4,
                any: Rate::new(k, 4),
                per_kind: [("stale-writes".to_string(), Rate::new(k, 4))].into(),
                ..Tally::default()
            },
            rates: Default::default(),
            reports: vec![],
            error: None,
        };
        let s = Sweep::new(
            "t".into(),
            "pause-holder".into(),
            Axis {
                param: "duration_leases".into(),
                fault: "pause-holder".into(),
                ttl_ms: 1000,
            },
            vec![SystemSweep {
                system: "redis".into(),
                rows: vec![row(0.5, 0), row(1.5, 4)],
                boundary: None,
            }],
            None,
            false,
        );
        let svg = render(&s, &s.systems[0]);
        assert_eq!(svg.matches(r#"class="kind""#).count(), 2, "{svg}");
        assert_eq!(svg.matches(r#"class="bar""#).count(), 4, "{svg}");
        assert!(
            svg.contains("1 lease") && svg.contains("a holder pause (duration_leases, leases)")
        );
        // The lease at x = 1 lies between the two points.
        let sc = scale(&s, &s.systems[0]);
        assert!(sc.x(0.5) < sc.x(1.0) && sc.x(1.0) < sc.x(1.5));
    }
}
