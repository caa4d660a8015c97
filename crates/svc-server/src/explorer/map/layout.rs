//! Where the map puts each schema and how each road runs: every connected part drawn in rings
//! around its first schema (one ring a hop; an outer schema placed towards the schemas it
//! comes from), the parts set in rows. Only arithmetic on the graph's order, so the same
//! catalog always gives the same picture.

use super::graph::Graph;
use std::collections::{BTreeMap, HashMap};
use std::f64::consts::TAU;

/// Distance between rings.
const RING_GAP: f64 = 170.0;
/// The least distance between two schemas on a ring.
const SPACING: f64 = 34.0;
/// Room around a part for its labels.
const MARGIN: f64 = 120.0;
/// How wide a row of parts grows before the next part starts a new row.
const ROW_WIDTH: f64 = 1600.0;
/// How far apart parallel roads between two schemas bow.
const BOW: f64 = 22.0;
/// A schema's dot, and the centre's.
const RADIUS: f64 = 8.0;
const CENTRE_RADIUS: f64 = 12.0;
/// An arrowhead's length along its road, and half its width.
const ARROW_LENGTH: f64 = 11.0;
const ARROW_HALF_WIDTH: f64 = 4.5;

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Point {
    pub x: f64,
    pub y: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Layout {
    /// Each node's centre, in the graph's order.
    pub points: Vec<Point>,
    /// Each edge's path (`d` of an SVG path), in the graph's order.
    pub paths: Vec<String>,
    /// Each edge's arrowhead, in the graph's order.
    pub arrows: Vec<Arrow>,
    /// Whether each node stands below its part's centre, where its label is tried first
    /// under it (away from the roads that come in from the centre).
    pub below: Vec<bool>,
    pub width: f64,
    pub height: f64,
}

pub(crate) fn lay_out(graph: &Graph) -> Layout {
    let parts = parts(graph);
    let neighbours = neighbours(graph);
    let mut points = vec![Point { x: 0.0, y: 0.0 }; graph.nodes.len()];
    let (mut x, mut y, mut row_height, mut width) = (0.0f64, 0.0f64, 0.0f64, 0.0f64);
    for part in parts {
        let placed = rings(graph, &part, &neighbours);
        // The part's box: its schemas, with room for their labels.
        let low = |f: fn(&Point) -> f64| placed.iter().map(f).fold(f64::INFINITY, f64::min);
        let high = |f: fn(&Point) -> f64| placed.iter().map(f).fold(f64::NEG_INFINITY, f64::max);
        let (left, top) = (low(|p| p.x) - MARGIN, low(|p| p.y) - MARGIN / 2.0);
        let (part_width, part_height) = (
            high(|p| p.x) + MARGIN - left,
            high(|p| p.y) + MARGIN / 2.0 - top,
        );
        if x > 0.0 && x + part_width > ROW_WIDTH {
            y += row_height;
            x = 0.0;
            row_height = 0.0;
        }
        for (node, point) in part.iter().zip(placed) {
            points[*node] = Point {
                x: x + point.x - left,
                y: y + point.y - top,
            };
        }
        x += part_width;
        width = width.max(x);
        row_height = row_height.max(part_height);
    }
    let centres = centres(graph, &points);
    let (paths, arrows) = paths(graph, &points, &centres);
    let below = points
        .iter()
        .zip(&centres)
        .map(|(point, centre)| point.y > centre.y + 1.0)
        .collect();
    Layout {
        points,
        paths,
        arrows,
        below,
        width: width.max(1.0),
        height: (y + row_height).max(1.0),
    }
}

/// The nodes of each connected part, in the graph's order: a part starts at a node of hop 0.
fn parts(graph: &Graph) -> Vec<Vec<usize>> {
    let mut parts: Vec<Vec<usize>> = Vec::new();
    for (i, node) in graph.nodes.iter().enumerate() {
        match parts.last_mut() {
            Some(part) if node.hop > 0 => part.push(i),
            _ => parts.push(vec![i]),
        }
    }
    parts
}

fn neighbours(graph: &Graph) -> Vec<Vec<usize>> {
    let mut next = vec![Vec::new(); graph.nodes.len()];
    for edge in &graph.edges {
        next[edge.source].push(edge.target);
        next[edge.target].push(edge.source);
    }
    next
}

/// One part's nodes around its first, relative to it.
fn rings(graph: &Graph, part: &[usize], neighbours: &[Vec<usize>]) -> Vec<Point> {
    let mut by_hop: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    for &node in part {
        by_hop.entry(graph.nodes[node].hop).or_default().push(node);
    }
    let mut angle: HashMap<usize, f64> = HashMap::new();
    let mut placed: HashMap<usize, Point> = HashMap::new();
    let mut radius = 0.0f64;
    for (hop, mut ring) in by_hop {
        if hop == 0 {
            for node in ring {
                placed.insert(node, Point { x: 0.0, y: 0.0 });
                angle.insert(node, 0.0);
            }
            continue;
        }
        radius = (radius + RING_GAP).max(ring.len() as f64 * SPACING / TAU);
        if hop > 1 {
            // Towards the schemas it comes from: the mean of their angles.
            let wanted: HashMap<usize, f64> = ring
                .iter()
                .map(|&node| {
                    (
                        node,
                        mean_angle(neighbours[node].iter().filter_map(|n| angle.get(n))),
                    )
                })
                .collect();
            ring.sort_by(|a, b| wanted[a].total_cmp(&wanted[b]).then(a.cmp(b)));
        }
        let count = ring.len() as f64;
        for (i, node) in ring.into_iter().enumerate() {
            let turn = TAU * i as f64 / count - TAU / 4.0;
            angle.insert(node, turn);
            placed.insert(
                node,
                Point {
                    x: radius * turn.cos(),
                    y: radius * turn.sin(),
                },
            );
        }
    }
    part.iter().map(|node| placed[node]).collect()
}

/// The mean direction of some angles, as an angle from `-TAU / 4` (the top) going round.
fn mean_angle<'a>(angles: impl Iterator<Item = &'a f64>) -> f64 {
    let (mut x, mut y) = (0.0, 0.0);
    for a in angles {
        x += a.cos();
        y += a.sin();
    }
    (y.atan2(x) + TAU / 4.0).rem_euclid(TAU)
}

/// Each node's part's centre: where its first schema stands.
fn centres(graph: &Graph, points: &[Point]) -> Vec<Point> {
    let mut centre = Point { x: 0.0, y: 0.0 };
    graph
        .nodes
        .iter()
        .zip(points)
        .map(|(node, point)| {
            if node.hop == 0 {
                centre = *point;
            }
            centre
        })
        .collect()
}

/// Each edge as a path with its arrowhead: straight, bowed apart when two schemas share
/// several roads, bowed outwards between two schemas of one ring (a straight road would cross
/// the rings inside it), a loop for a road from a schema to itself.
fn paths(graph: &Graph, points: &[Point], centres: &[Point]) -> (Vec<String>, Vec<Arrow>) {
    let mut shared: HashMap<(usize, usize), usize> = HashMap::new();
    for edge in &graph.edges {
        *shared.entry(pair(edge.source, edge.target)).or_default() += 1;
    }
    let mut seen: HashMap<(usize, usize), usize> = HashMap::new();
    graph
        .edges
        .iter()
        .map(|edge| {
            let key = pair(edge.source, edge.target);
            let nth = seen.entry(key).or_default();
            let bow = (*nth as f64 - (shared[&key] as f64 - 1.0) / 2.0) * BOW;
            *nth += 1;
            let (a, b) = (points[edge.source], points[edge.target]);
            let (d, towards) = match edge.source == edge.target {
                true => looped(a, bow),
                false => {
                    // Bow to the same side of the line whichever way the road runs.
                    let sign = if edge.source < edge.target { 1.0 } else { -1.0 };
                    let hop = graph.nodes[edge.source].hop;
                    let ring = (hop > 0 && hop == graph.nodes[edge.target].hop)
                        .then_some(centres[edge.source]);
                    curved(a, b, bow * sign, ring)
                }
            };
            (d, Arrow::at(b, towards, radius(graph, edge.target)))
        })
        .unzip()
}

/// A loop from a schema to itself, and the direction it arrives in.
fn looped(a: Point, bow: f64) -> (String, (f64, f64)) {
    let lift = 30.0 + bow.abs();
    let d = format!(
        "M{:.1} {:.1}c-{lift:.1} -{lift:.1} {lift:.1} -{lift:.1} 0 0",
        a.x, a.y
    );
    // The last control point stands up and to the right of the schema.
    (d, (-1.0, 1.0))
}

/// A road from `a` to `b` bowed by `bow`, and outwards from `ring`'s centre when both stand
/// on one ring; and the direction it arrives in.
fn curved(a: Point, b: Point, bow: f64, ring: Option<Point>) -> (String, (f64, f64)) {
    let (dx, dy) = (b.x - a.x, b.y - a.y);
    let length = (dx * dx + dy * dy).sqrt().max(1.0);
    let (nx, ny) = (-dy / length * bow, dx / length * bow);
    let (mut mx, mut my) = ((a.x + b.x) / 2.0 + 2.0 * nx, (a.y + b.y) / 2.0 + 2.0 * ny);
    if let Some(centre) = ring {
        let (ox, oy) = ((a.x + b.x) / 2.0 - centre.x, (a.y + b.y) / 2.0 - centre.y);
        let out = (ox * ox + oy * oy).sqrt();
        // Away from the centre; across it, to one side.
        let (ux, uy) = match out > 1.0 {
            true => (ox / out, oy / out),
            false => (-dy / length, dx / length),
        };
        let reach = 0.35 * length;
        mx += ux * reach;
        my += uy * reach;
    }
    let d = format!(
        "M{:.1} {:.1}Q{mx:.1} {my:.1} {:.1} {:.1}",
        a.x, a.y, b.x, b.y
    );
    // A quadratic arrives along the line from its control point.
    let towards = match (b.x - mx).abs() + (b.y - my).abs() > 0.1 {
        true => (b.x - mx, b.y - my),
        false => (dx, dy),
    };
    (d, towards)
}

/// How big a schema's dot is drawn: the centre of a neighbourhood bigger.
pub(crate) fn radius(graph: &Graph, node: usize) -> f64 {
    match graph.centred && node == 0 {
        true => CENTRE_RADIUS,
        false => RADIUS,
    }
}

/// A road's arrowhead, drawn as a shape of its own (not a marker) so that the labels can be
/// placed clear of it: its tip just outside the schema it points to.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Arrow {
    pub d: String,
    pub bounds: Rect,
}

impl Arrow {
    fn at(target: Point, towards: (f64, f64), radius: f64) -> Arrow {
        let length = (towards.0 * towards.0 + towards.1 * towards.1)
            .sqrt()
            .max(f64::EPSILON);
        let (ux, uy) = (towards.0 / length, towards.1 / length);
        let tip = (
            target.x - ux * (radius + 2.0),
            target.y - uy * (radius + 2.0),
        );
        let base = (tip.0 - ux * ARROW_LENGTH, tip.1 - uy * ARROW_LENGTH);
        let (px, py) = (-uy * ARROW_HALF_WIDTH, ux * ARROW_HALF_WIDTH);
        let corners = [tip, (base.0 + px, base.1 + py), (base.0 - px, base.1 - py)];
        let d = format!(
            "M{:.1} {:.1}L{:.1} {:.1}L{:.1} {:.1}z",
            corners[0].0, corners[0].1, corners[1].0, corners[1].1, corners[2].0, corners[2].1
        );
        Arrow {
            d,
            bounds: Rect::around(&corners),
        }
    }
}

/// A box in the picture's units.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Rect {
    pub left: f64,
    pub top: f64,
    pub right: f64,
    pub bottom: f64,
}

impl Rect {
    /// The least box holding these points, widened by a pixel for rounding.
    pub fn around(points: &[(f64, f64)]) -> Rect {
        let fold = |f: fn(&(f64, f64)) -> f64, start: f64, pick: fn(f64, f64) -> f64| {
            points.iter().map(f).fold(start, pick)
        };
        Rect {
            left: fold(|p| p.0, f64::INFINITY, f64::min) - 1.0,
            top: fold(|p| p.1, f64::INFINITY, f64::min) - 1.0,
            right: fold(|p| p.0, f64::NEG_INFINITY, f64::max) + 1.0,
            bottom: fold(|p| p.1, f64::NEG_INFINITY, f64::max) + 1.0,
        }
    }

    pub fn overlaps(&self, other: &Rect) -> bool {
        self.left < other.right
            && other.left < self.right
            && self.top < other.bottom
            && other.top < self.bottom
    }

    pub fn within(&self, width: f64, height: f64) -> bool {
        self.left >= 0.0 && self.top >= 0.0 && self.right <= width && self.bottom <= height
    }
}

fn pair(a: usize, b: usize) -> (usize, usize) {
    (a.min(b), a.max(b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explorer::map::graph::{Edge, Node, Verdict};

    fn graph(hops: &[u32], edges: &[(usize, usize)]) -> Graph {
        Graph {
            nodes: hops
                .iter()
                .enumerate()
                .map(|(i, &hop)| Node {
                    uri: format!("at://did:plc:a/s/{i}"),
                    hop,
                    weight: 1,
                })
                .collect(),
            edges: edges
                .iter()
                .map(|&(source, target)| Edge {
                    source,
                    target,
                    lens: None,
                    records: 1,
                    verdict: Verdict::Wanted,
                    findings: Default::default(),
                })
                .collect(),
            ..Graph::default()
        }
    }

    #[test]
    fn the_same_graph_gives_the_same_picture_with_each_schema_apart() {
        let g = graph(
            &[0, 1, 1, 1, 2, 2, 0, 1],
            &[
                (0, 1),
                (0, 2),
                (0, 3),
                (1, 4),
                (3, 5),
                (6, 7),
                (0, 1),
                (2, 2),
            ],
        );
        let first = lay_out(&g);
        assert_eq!(first, lay_out(&g));
        for (i, a) in first.points.iter().enumerate() {
            assert!(a.x >= 0.0 && a.y >= 0.0 && a.x <= first.width && a.y <= first.height);
            for b in &first.points[i + 1..] {
                assert!((a.x - b.x).abs() + (a.y - b.y).abs() > 10.0, "{first:?}");
            }
        }
        assert_ne!(first.paths[0], first.paths[6], "parallel roads bow apart");
        assert!(first.paths[7].contains('c'), "a loop");
    }
}
