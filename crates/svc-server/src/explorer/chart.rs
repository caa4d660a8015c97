//! Charts drawn on the server as SVG: bars (stacked when a slot holds several series) or a
//! line over time, with labelled axes and a text alternative that says the same in words. The
//! colours are the stylesheet's, so charts follow light and dark schemes.

/// The drawing's size, in its own units (it scales to the page).
const WIDTH: f64 = 640.0;
const HEIGHT: f64 = 200.0;
/// Room for the axes' labels.
const LEFT: f64 = 56.0;
const BOTTOM: f64 = 30.0;
const TOP: f64 = 24.0;
const RIGHT: f64 = 8.0;
/// Lines across the plot, besides zero.
const Y_TICKS: u32 = 4;

pub(crate) struct Chart {
    pub id: &'static str,
    pub title: String,
    /// The text alternative: the chart in a sentence.
    pub alt: String,
    pub x_label: String,
    pub y_label: String,
    pub x_ticks: Vec<Tick>,
    pub y_ticks: Vec<Tick>,
    pub bars: Vec<Bar>,
    /// A line's path (`d`), for a line chart.
    pub line: Option<String>,
    /// The plot's corners and scale, for the live script.
    pub plot: Plot,
    /// The unix minute of the last slot, for a chart the live script adds changes to.
    pub live_minute: Option<i64>,
}

pub(crate) struct Tick {
    pub at: String,
    pub label: String,
}

pub(crate) struct Bar {
    pub x: String,
    pub y: String,
    pub width: String,
    pub height: String,
    pub class: &'static str,
    pub title: String,
    pub value: u64,
}

pub(crate) struct Plot {
    pub left: String,
    pub right: String,
    pub top: String,
    pub bottom: String,
    pub top_value: u64,
}

/// One slot of a bar chart: its label and each series' value in it.
pub(crate) struct Slot {
    pub label: String,
    pub values: Vec<(&'static str, u64)>,
}

/// What a chart is of.
pub(crate) struct Axes<'a> {
    pub id: &'static str,
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    /// Label every this many slots on the x axis.
    pub label_every: usize,
}

/// Stacked bars, one a slot, oldest first.
pub(crate) fn bars(axes: &Axes<'_>, slots: &[Slot], alt: String) -> Chart {
    let most = slots
        .iter()
        .map(|slot| slot.values.iter().map(|(_, v)| v).sum::<u64>())
        .max()
        .unwrap_or(0);
    let top_value = nice_ceiling(most);
    let step = (WIDTH - LEFT - RIGHT) / slots.len().max(1) as f64;
    let mut bars = Vec::new();
    for (i, slot) in slots.iter().enumerate() {
        let mut base = 0u64;
        for &(class, value) in &slot.values {
            let y_top = y_of(base + value, top_value);
            let y_bottom = y_of(base, top_value);
            bars.push(Bar {
                x: format!("{:.1}", LEFT + i as f64 * step + step * 0.1),
                y: format!("{y_top:.1}"),
                width: format!("{:.1}", step * 0.8),
                height: format!("{:.1}", y_bottom - y_top),
                class,
                title: format!("{}: {value} {class}", slot.label),
                value,
            });
            base += value;
        }
    }
    let x_ticks = slots
        .iter()
        .enumerate()
        .filter(|(i, _)| i % axes.label_every.max(1) == 0)
        .map(|(i, slot)| Tick {
            at: format!("{:.1}", LEFT + (i as f64 + 0.5) * step),
            label: slot.label.clone(),
        })
        .collect();
    chart(axes, alt, x_ticks, bars, None, top_value)
}

/// A line through the points (none where a point is unknown), oldest first.
pub(crate) fn line(axes: &Axes<'_>, points: &[(String, Option<f64>)], alt: String) -> Chart {
    let most = points.iter().filter_map(|(_, v)| *v).fold(0.0f64, f64::max);
    let top_value = nice_ceiling(most.ceil() as u64);
    let step = (WIDTH - LEFT - RIGHT) / (points.len().max(2) - 1) as f64;
    let mut d = String::new();
    // Points since the last gap: a lone one is drawn as a dot (a round-capped stub).
    let mut run = 0;
    for (i, (_, value)) in points.iter().enumerate() {
        match value {
            Some(value) => {
                let x = LEFT + i as f64 * step;
                let y = y_of_f(*value, top_value);
                d.push_str(&format!("{}{x:.1} {y:.1}", if run > 0 { "L" } else { "M" }));
                run += 1;
            }
            None => {
                if run == 1 {
                    d.push_str("h0.1");
                }
                run = 0;
            }
        }
    }
    if run == 1 {
        d.push_str("h0.1");
    }
    let x_ticks = points
        .iter()
        .enumerate()
        .filter(|(i, _)| i % axes.label_every.max(1) == 0)
        .map(|(i, (label, _))| Tick {
            at: format!("{:.1}", LEFT + i as f64 * step),
            label: label.clone(),
        })
        .collect();
    let line = (!d.is_empty()).then_some(d);
    chart(axes, alt, x_ticks, Vec::new(), line, top_value)
}

fn chart(
    axes: &Axes<'_>,
    alt: String,
    x_ticks: Vec<Tick>,
    bars: Vec<Bar>,
    line: Option<String>,
    top_value: u64,
) -> Chart {
    let y_ticks = (0..=Y_TICKS)
        .map(|i| {
            let value = top_value * u64::from(i) / u64::from(Y_TICKS);
            Tick {
                at: format!("{:.1}", y_of(value, top_value)),
                label: short_number(value),
            }
        })
        .collect();
    Chart {
        id: axes.id,
        title: axes.title.to_string(),
        alt,
        x_label: axes.x_label.to_string(),
        y_label: axes.y_label.to_string(),
        x_ticks,
        y_ticks,
        bars,
        line,
        plot: Plot {
            left: format!("{LEFT:.0}"),
            right: format!("{:.0}", WIDTH - RIGHT),
            top: format!("{TOP:.0}"),
            bottom: format!("{:.0}", HEIGHT - BOTTOM),
            top_value,
        },
        live_minute: None,
    }
}

fn y_of(value: u64, top: u64) -> f64 {
    y_of_f(value as f64, top)
}

fn y_of_f(value: f64, top: u64) -> f64 {
    let plot = HEIGHT - BOTTOM - TOP;
    HEIGHT - BOTTOM - plot * (value / top.max(1) as f64).min(1.0)
}

/// The top of the scale: four times the least of 1, 2, 5 times a power of ten that makes it
/// reach `n`, so that the lines across fall on round numbers.
pub(crate) fn nice_ceiling(n: u64) -> u64 {
    let per_line = n.div_ceil(u64::from(Y_TICKS)).max(1);
    let mut power = 1u64;
    loop {
        for step in [1, 2, 5] {
            if step * power >= per_line {
                return step * power * u64::from(Y_TICKS);
            }
        }
        match power.checked_mul(10) {
            Some(next) => power = next,
            None => return u64::MAX,
        }
    }
}

/// `950`, `12k`, `3.4M`.
pub(crate) fn short_number(n: u64) -> String {
    match n {
        n if n >= 10_000_000 => format!("{}M", n / 1_000_000),
        n if n >= 1_000_000 => format!("{:.1}M", n as f64 / 1e6),
        n if n >= 10_000 => format!("{}k", n / 1000),
        n if n >= 1000 => format!("{:.1}k", n as f64 / 1e3),
        n => n.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_end_on_round_numbers_above_the_highest_value() {
        assert_eq!(nice_ceiling(0), 4);
        assert_eq!(nice_ceiling(7), 8);
        assert_eq!(nice_ceiling(10), 20);
        assert_eq!(nice_ceiling(101), 200);
        assert_eq!(nice_ceiling(4_000_001), 8_000_000);
        assert_eq!(short_number(12_345), "12k");
        assert_eq!(short_number(1_500), "1.5k");
    }

    #[test]
    fn stacked_bars_rise_from_the_axis_to_their_total() {
        let axes = Axes {
            id: "t",
            title: "t",
            x_label: "x",
            y_label: "y",
            label_every: 1,
        };
        let slots = [Slot {
            label: "w1".into(),
            values: vec![("holds", 3), ("falsified", 2)],
        }];
        let chart = bars(&axes, &slots, String::new());
        let bottom: f64 = chart.plot.bottom.parse().unwrap_or_default();
        let first_bottom: f64 = chart.bars[0].y.parse::<f64>().unwrap_or_default()
            + chart.bars[0].height.parse::<f64>().unwrap_or_default();
        assert!((first_bottom - bottom).abs() < 0.2);
        assert_eq!(chart.plot.top_value, 8);
        let total_top: f64 = chart.bars[1].y.parse().unwrap_or_default();
        assert!((total_top - y_of(5, 8)).abs() < 0.1, "the total's height");
    }
}
