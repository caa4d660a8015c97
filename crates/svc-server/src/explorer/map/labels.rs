//! Where each schema's label stands: beside its dot on the first side (above, below, right,
//! left, then the same a little further out) where it covers no arrowhead, no other schema's
//! dot and no label placed before it, inside the picture. A label with no such place is not
//! drawn: the schema's title and the list below still name it. Labels are set in a monospace
//! face at a length the page fixes (`textLength`), so the box reckoned here is the box drawn.

use super::layout::{Layout, Rect};

/// The label's font size, and the advance of one character at that size.
pub(crate) const FONT_SIZE: f64 = 12.0;
pub(crate) const CHAR_WIDTH: f64 = 7.2;
/// How far the text's box reaches above and below its baseline.
const ASCENT: f64 = 12.0;
const DESCENT: f64 = 4.0;
/// The gap between a dot and its label, and how much further the second try stands.
const GAP: f64 = 5.0;
const FURTHER: f64 = 18.0;

/// A label placed: its baseline's anchor point, and which end of the text stands there.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Placed {
    pub x: f64,
    pub y: f64,
    pub anchor: &'static str,
    pub width: f64,
}

/// A label's place for each schema (`chars` long each), in the graph's order; `radii` are
/// the dots' sizes.
pub(crate) fn place(laid: &Layout, radii: &[f64], chars: &[usize]) -> Vec<Option<Placed>> {
    let mut taken: Vec<Rect> = laid.arrows.iter().map(|arrow| arrow.bounds).collect();
    taken.extend(
        laid.points
            .iter()
            .zip(radii)
            .map(|(p, r)| Rect::around(&[(p.x - r, p.y - r), (p.x + r, p.y + r)])),
    );
    let mut placed = Vec::with_capacity(chars.len());
    for (i, point) in laid.points.iter().enumerate() {
        let width = chars.get(i).copied().unwrap_or_default() as f64 * CHAR_WIDTH;
        let (r, below) = (radii[i], laid.below.get(i).copied().unwrap_or(false));
        let free = tries(point.x, point.y, r, width, below).find(|label| {
            let bounds = label.bounds();
            bounds.within(laid.width, laid.height) && !taken.iter().any(|t| t.overlaps(&bounds))
        });
        if let Some(label) = &free {
            taken.push(label.bounds());
        }
        placed.push(free);
    }
    placed
}

/// The places tried for one label, in order: away from the centre first.
fn tries(x: f64, y: f64, r: f64, width: f64, below: bool) -> impl Iterator<Item = Placed> {
    [0.0, FURTHER].into_iter().flat_map(move |further| {
        let off = r + GAP + further;
        let over = Placed {
            x,
            y: y - off - DESCENT,
            anchor: "middle",
            width,
        };
        let under = Placed {
            x,
            y: y + off + ASCENT,
            anchor: "middle",
            width,
        };
        let (first, second) = if below { (under, over) } else { (over, under) };
        let side = |x: f64, anchor| Placed {
            x,
            y: y + FONT_SIZE / 3.0,
            anchor,
            width,
        };
        [first, second, side(x + off, "start"), side(x - off, "end")]
    })
}

impl Placed {
    /// The box the text covers.
    pub fn bounds(&self) -> Rect {
        let left = match self.anchor {
            "start" => self.x,
            "end" => self.x - self.width,
            _ => self.x - self.width / 2.0,
        };
        Rect::around(&[
            (left, self.y - ASCENT),
            (left + self.width, self.y + DESCENT),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explorer::map::graph::{Edge, Graph, Node, Verdict};
    use crate::explorer::map::layout::lay_out;

    #[test]
    fn no_label_covers_an_arrowhead_a_dot_or_another_label() {
        // A crowded ring: every schema points at the centre and at its neighbour.
        let n = 24;
        let graph = Graph {
            nodes: (0..n)
                .map(|i| Node {
                    uri: format!("at://did:plc:a/s/{i}"),
                    hop: u32::from(i > 0),
                    weight: 1,
                })
                .collect(),
            edges: (1..n)
                .flat_map(|i| [(i, 0), (i, 1 + i % (n - 1)), (0, i)])
                .map(|(source, target)| Edge {
                    source,
                    target,
                    lens: None,
                    records: 1,
                    verdict: Verdict::Wanted,
                    findings: Default::default(),
                })
                .collect(),
            centred: true,
            ..Graph::default()
        };
        let laid = lay_out(&graph);
        let radii: Vec<f64> = (0..n).map(|i| if i == 0 { 12.0 } else { 8.0 }).collect();
        let placed = place(&laid, &radii, &vec![24; n]);
        let boxes: Vec<Rect> = placed.iter().flatten().map(Placed::bounds).collect();
        assert!(boxes.len() >= n / 4, "labels find places: {placed:?}");
        for (i, label) in boxes.iter().enumerate() {
            assert!(label.within(laid.width, laid.height));
            assert!(laid.arrows.iter().all(|a| !a.bounds.overlaps(label)));
            assert!(boxes[i + 1..].iter().all(|other| !other.overlaps(label)));
        }
    }
}
