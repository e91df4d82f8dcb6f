//! Hand-rolled SVG line charts over run time, with the nemesis periods as
//! shaded bands: small, dependency-free, and static (no script needed).

use super::html::esc;
use super::nemesis::Band;
use std::fmt::Write as _;

/// One line of a chart. `NaN` y values break the line.
#[derive(Clone, Debug)]
pub struct Series {
    pub name: String,
    pub color: &'static str,
    pub dashed: bool,
    /// (seconds since the run started, value).
    pub points: Vec<(f64, f64)>,
}

/// A chart: lines over run time (seconds) with fault bands.
pub struct Chart<'a> {
    pub title: &'a str,
    pub y_unit: &'a str,
    pub log_y: bool,
    pub x_max: f64,
    pub series: Vec<Series>,
    pub bands: &'a [Band],
}

const W: f64 = 960.0;
const H: f64 = 240.0;
const L: f64 = 64.0;
const R: f64 = 12.0;
const T: f64 = 40.0;
const B: f64 = 30.0;

/// 1, 2 or 5 × 10^k, about `span / n`.
pub fn nice_step(span: f64, n: f64) -> f64 {
    let raw = (span / n).max(f64::MIN_POSITIVE);
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    mag * if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    }
}

pub fn fmt_num(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v.abs() >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.1}")
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').to_string()
    }
}

struct Scale {
    x_max: f64,
    y_min: f64,
    y_max: f64,
    log: bool,
}

impl Scale {
    fn x(&self, s: f64) -> f64 {
        L + (W - L - R) * (s / self.x_max).clamp(0.0, 1.0)
    }
    fn y(&self, v: f64) -> f64 {
        let (v, lo, hi) = if self.log {
            (
                v.max(self.y_min).log10(),
                self.y_min.log10(),
                self.y_max.log10(),
            )
        } else {
            (v, self.y_min, self.y_max)
        };
        let f = if hi > lo { (v - lo) / (hi - lo) } else { 0.0 };
        H - B - (H - T - B) * f.clamp(0.0, 1.0)
    }
    fn y_ticks(&self) -> Vec<f64> {
        if self.log {
            let (a, b) = (
                self.y_min.log10().floor() as i32,
                self.y_max.log10().ceil() as i32,
            );
            return (a..=b).map(|e| 10f64.powi(e)).collect();
        }
        let step = nice_step(self.y_max - self.y_min, 4.0);
        (0..=((self.y_max / step).ceil() as i64))
            .map(|i| i as f64 * step)
            .collect()
    }
}

fn scale(c: &Chart) -> Scale {
    let ys = c
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .filter(|v| v.is_finite());
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in ys {
        if !c.log_y || v > 0.0 {
            lo = lo.min(v);
            hi = hi.max(v);
        }
    }
    if !hi.is_finite() {
        (lo, hi) = (1.0, 10.0);
    }
    let x_max = c.x_max.max(1e-3);
    if c.log_y {
        let lo = 10f64.powf(lo.max(1e-3).log10().floor());
        let hi = 10f64.powf(hi.max(lo * 10.0).log10().ceil());
        Scale {
            x_max,
            y_min: lo,
            y_max: hi,
            log: true,
        }
    } else {
        let step = nice_step(hi.max(1e-9), 4.0);
        Scale {
            x_max,
            y_min: 0.0,
            y_max: (hi / step).ceil().max(1.0) * step,
            log: false,
        }
    }
}

fn axes(s: &mut String, sc: &Scale, c: &Chart) {
    let _ = write!(
        s,
        r#"<text class="ct" x="{L}" y="16">{}</text>"#,
        esc(c.title)
    );
    for v in sc.y_ticks() {
        let y = sc.y(v);
        let _ = write!(
            s,
            r#"<line class="grid" x1="{L}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}"/><text class="tk" x="{:.1}" y="{:.1}" text-anchor="end">{} {}</text>"#,
            W - R,
            L - 4.0,
            y + 4.0,
            fmt_num(v),
            esc(c.y_unit)
        );
    }
    let step = nice_step(sc.x_max, 8.0);
    let mut x = 0.0;
    while x <= sc.x_max + 1e-9 {
        let _ = write!(
            s,
            r#"<text class="tk" x="{:.1}" y="{:.1}" text-anchor="middle">{} s</text>"#,
            sc.x(x),
            H - B + 16.0,
            fmt_num(x)
        );
        x += step;
    }
    let _ = write!(
        s,
        r#"<line class="axis" x1="{L}" x2="{:.1}" y1="{:.1}" y2="{:.1}"/>"#,
        W - R,
        H - B,
        H - B
    );
}

fn bands(s: &mut String, sc: &Scale, bands: &[Band]) {
    for b in bands {
        let (x0, x1) = (sc.x(b.start as f64 / 1e9), sc.x(b.end as f64 / 1e9));
        let _ = write!(
            s,
            r#"<rect class="band" x="{x0:.1}" y="{T}" width="{:.1}" height="{:.1}"><title>{}</title></rect>"#,
            (x1 - x0).max(1.0),
            H - T - B,
            esc(&b.label)
        );
    }
}

fn lines(s: &mut String, sc: &Scale, series: &[Series]) {
    for sr in series {
        let mut d = String::new();
        let mut dots = String::new();
        let ok = |i: usize| {
            sr.points
                .get(i)
                .is_some_and(|p| p.1.is_finite() && (!sc.log || p.1 > 0.0))
        };
        for (i, &(x, y)) in sr.points.iter().enumerate() {
            if !ok(i) {
                continue;
            }
            let pen_up = i == 0 || !ok(i - 1);
            let (px, py) = (sc.x(x), sc.y(y));
            let _ = write!(d, "{}{px:.1},{py:.1}", if pen_up { "M" } else { "L" });
            if pen_up && !ok(i + 1) {
                // An isolated point draws no line: mark it.
                let _ = write!(
                    dots,
                    r#"<circle cx="{px:.1}" cy="{py:.1}" r="1.8" fill="{}"/>"#,
                    sr.color
                );
            }
        }
        s.push_str(&dots);
        let dash = if sr.dashed {
            r#" stroke-dasharray="4 3""#
        } else {
            ""
        };
        let _ = write!(
            s,
            r#"<path d="{d}" fill="none" stroke="{}" stroke-width="1.5"{dash}><title>{}</title></path>"#,
            sr.color,
            esc(&sr.name)
        );
    }
}

fn legend(s: &mut String, series: &[Series]) {
    let mut x = L + 260.0;
    for sr in series {
        let dash = if sr.dashed {
            r#" stroke-dasharray="4 3""#
        } else {
            ""
        };
        let _ = write!(
            s,
            r#"<line x1="{x:.0}" x2="{:.0}" y1="30" y2="30" stroke="{}" stroke-width="2"{dash}/><text class="tk" x="{:.0}" y="34">{}</text>"#,
            x + 16.0,
            sr.color,
            x + 20.0,
            esc(&sr.name)
        );
        x += 28.0 + 6.5 * sr.name.len() as f64;
    }
}

/// The chart as an inline `<svg>` element.
pub fn render(c: &Chart) -> String {
    let sc = scale(c);
    let mut s = format!(
        r#"<svg class="chart" viewBox="0 0 {W} {H}" role="img" aria-label="{}">"#,
        esc(c.title)
    );
    bands(&mut s, &sc, c.bands);
    axes(&mut s, &sc, c);
    lines(&mut s, &sc, &c.series);
    legend(&mut s, &c.series);
    s.push_str("</svg>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_steps() {
        assert_eq!(nice_step(10.0, 5.0), 2.0);
        assert_eq!(nice_step(0.9, 4.0), 0.5);
        assert_eq!(nice_step(700.0, 8.0), 100.0);
    }

    #[test]
    fn renders_lines_bands_and_gaps() {
        let band = Band {
            start: 1_000_000_000,
            end: 2_000_000_000,
            label: "pause <x>".into(),
            open: false,
            ops: vec![],
        };
        let c = Chart {
            title: "latency",
            y_unit: "ms",
            log_y: true,
            x_max: 4.0,
            series: vec![Series {
                name: "acquire p50".into(),
                color: "#123",
                dashed: false,
                points: vec![(0.5, 1.0), (1.5, f64::NAN), (2.5, 100.0), (3.5, 10.0)],
            }],
            bands: std::slice::from_ref(&band),
        };
        let svg = render(&c);
        assert!(svg.contains("pause &lt;x&gt;"));
        assert_eq!(
            svg.matches('M').count(),
            2,
            "the NaN breaks the line in two: {svg}"
        );
        assert!(svg.contains(">100 ms</text>"), "{svg}");
    }
}
