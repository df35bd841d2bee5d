//! Label placement for plots: greedy, in priority order. Each label has an anchor (a marker,
//! a point on a roof) and candidate offsets around it; the first candidate inside the plot
//! that overlaps neither a placed label nor an obstacle (markers, error bars, leader lines)
//! wins. When all collide the candidates are nudged outwards in growing vertical and
//! horizontal steps.
//!
//! A marker's label (one with `rivals`, the other points' markers) must not seem to belong to
//! another marker: without a leader line it stays within `max_nudge` px of its own anchor and
//! nearer to it than to any rival. When no such spot is free, it may go farther with a thin
//! leader line to its marker (`leader`); when even that fails, a label that may hide is
//! dropped (and the caller lists it). Placed labels never overlap, which the tests check.

/// An axis-aligned box in pixels, top-left origin.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rect {
    pub x: f64,
    pub y: f64,
    pub w: f64,
    pub h: f64,
}

impl Rect {
    pub fn new(x: f64, y: f64, w: f64, h: f64) -> Rect {
        Rect { x, y, w, h }
    }
    pub fn around(cx: f64, cy: f64, r: f64) -> Rect {
        Rect::new(cx - r, cy - r, 2.0 * r, 2.0 * r)
    }
    /// Interiors intersect (touching edges do not count).
    pub fn overlaps(&self, o: &Rect) -> bool {
        self.x < o.x + o.w && o.x < self.x + self.w && self.y < o.y + o.h && o.y < self.y + self.h
    }
    pub fn inside(&self, area: &Rect) -> bool {
        self.x >= area.x && self.y >= area.y && self.x + self.w <= area.x + area.w && self.y + self.h <= area.y + area.h
    }
    fn grown(&self, pad: f64) -> Rect {
        Rect::new(self.x - pad, self.y - pad, self.w + 2.0 * pad, self.h + 2.0 * pad)
    }
    /// The point of the box nearest to `p` (`p` itself when inside).
    pub fn nearest(&self, p: (f64, f64)) -> (f64, f64) {
        (p.0.clamp(self.x, self.x + self.w), p.1.clamp(self.y, self.y + self.h))
    }
    /// Distance from `p` to the box (0 inside).
    pub fn dist(&self, p: (f64, f64)) -> f64 {
        let n = self.nearest(p);
        (n.0 - p.0).hypot(n.1 - p.1)
    }
}

/// One label to place.
#[derive(Debug, Clone)]
pub struct Label {
    pub text: String,
    pub anchor: (f64, f64),
    /// Text box size in pixels.
    pub size: (f64, f64),
    /// Offsets of the box's top-left corner from the anchor, best first.
    pub candidates: Vec<(f64, f64)>,
    /// More points that are the label's own (samples along its roof line).
    pub owns: Vec<(f64, f64)>,
    /// Anchors this label must not look closer to than its own (other points' markers,
    /// samples along other roof lines).
    pub rivals: Vec<(f64, f64)>,
    /// Without a leader line the box stays within this distance (px) of its anchor.
    pub max_nudge: f64,
    /// May the label go farther, or nearer a rival, with a leader line to its anchor?
    pub leader: bool,
    /// Where no spot reads as its own, take any free spot rather than none (roof labels:
    /// every roof is labelled).
    pub ambiguous_ok: bool,
}

/// Nudge limit of a marker's label without a leader line (px from the marker's centre).
pub const MARKER_NUDGE: f64 = 22.0;

impl Label {
    /// A label at candidate offsets, nudged as far as needed, no rivals, no leader line
    /// (roof and ridge labels).
    pub fn free(text: impl Into<String>, anchor: (f64, f64), size: (f64, f64), candidates: Vec<(f64, f64)>) -> Label {
        Label {
            text: text.into(),
            anchor,
            size,
            candidates,
            owns: vec![],
            rivals: vec![],
            max_nudge: f64::INFINITY,
            leader: false,
            ambiguous_ok: true,
        }
    }

    /// A label beside a marker of radius `r`: right, left, above, below, then the corners;
    /// kept near it (`MARKER_NUDGE`), else placed with a leader line.
    pub fn for_marker(text: impl Into<String>, anchor: (f64, f64), size: (f64, f64), r: f64) -> Label {
        let (w, h) = size;
        let g = r + 3.0;
        Label {
            text: text.into(),
            anchor,
            size,
            candidates: vec![
                (g, -h / 2.0),
                (-w - g, -h / 2.0),
                (-w / 2.0, -h - g),
                (-w / 2.0, g),
                (g, -h - g / 2.0),
                (g, g / 2.0),
                (-w - g, -h - g / 2.0),
                (-w - g, g / 2.0),
            ],
            owns: vec![],
            rivals: vec![],
            max_nudge: MARKER_NUDGE.max(r + 3.0),
            leader: true,
            ambiguous_ok: false,
        }
    }

    /// With the other points' markers as rivals.
    pub fn with_rivals(mut self, rivals: Vec<(f64, f64)>) -> Label {
        self.rivals = rivals;
        self
    }

    /// With more points of its own (samples along its roof line).
    pub fn with_owns(mut self, owns: Vec<(f64, f64)>) -> Label {
        self.owns = owns;
        self
    }

    /// Does a box here read as this label's own (near its anchor, nearer than any rival)?
    pub fn reads_as_own(&self, r: &Rect) -> bool {
        let own = self.owns.iter().map(|&p| r.dist(p)).fold(r.dist(self.anchor), f64::min);
        own <= self.max_nudge && self.rivals.iter().all(|&p| r.dist(p) > own)
    }
}

/// A placed label: its box, and whether it needs a leader line to its anchor.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Placed {
    pub rect: Rect,
    pub leader: bool,
}

/// Gap kept between labels.
const PAD: f64 = 1.5;

/// The leader line of a box: from the anchor's marker edge (radius `r`) to the box's nearest point.
pub fn leader_line(anchor: (f64, f64), rect: &Rect, r: f64) -> ((f64, f64), (f64, f64)) {
    let n = rect.nearest(anchor);
    let (dx, dy) = (n.0 - anchor.0, n.1 - anchor.1);
    let len = dx.hypot(dy).max(1e-9);
    let s = r.min(len);
    ((anchor.0 + dx / len * s, anchor.1 + dy / len * s), n)
}

/// Small boxes every few pixels along a segment (obstacles for later labels).
pub fn segment_boxes(a: (f64, f64), b: (f64, f64), half: f64) -> Vec<Rect> {
    let steps = ((b.0 - a.0).hypot(b.1 - a.1) / 4.0).ceil().max(1.0) as usize;
    (0..=steps)
        .map(|k| {
            let t = k as f64 / steps as f64;
            Rect::around(a.0 + (b.0 - a.0) * t, a.1 + (b.1 - a.1) * t, half)
        })
        .collect()
}

/// Place labels in order; `None` where a label could not be placed without overlap.
pub fn place(labels: &[Label], obstacles: &[Rect], area: Rect) -> Vec<Option<Placed>> {
    let mut placed: Vec<Rect> = Vec::new();
    // Leader lines drawn so far: later labels avoid them.
    let mut leaders: Vec<Rect> = Vec::new();
    let mut out = Vec::with_capacity(labels.len());
    for l in labels {
        let (w, h) = l.size;
        let at = |dx: f64, dy: f64| Rect::new(l.anchor.0 + dx, l.anchor.1 + dy, w, h);
        // Spots in order: the candidates as given, then each shifted by growing steps,
        // vertically first.
        let mut spots: Vec<Rect> = l.candidates.iter().map(|&(dx, dy)| at(dx, dy)).collect();
        for k in 1..=24 {
            let step_y = k as f64 * (h / 2.0 + PAD);
            let step_x = k as f64 * (w / 4.0 + PAD);
            for &(dx, dy) in &l.candidates {
                for (sx, sy) in [(0.0, -step_y), (0.0, step_y), (step_x, 0.0), (-step_x, 0.0)] {
                    spots.push(at(dx + sx, dy + sy));
                }
            }
        }
        // Leader lines: the nearest free spot first.
        let mut by_distance = spots.clone();
        crate::util::sort_by(&mut by_distance, |a, b| a.dist(l.anchor).total_cmp(&b.dist(l.anchor)));
        let free_of = |r: &Rect, obs: bool| {
            r.inside(&area)
                && !placed.iter().any(|p| p.grown(PAD).overlaps(r))
                && !leaders.iter().any(|o| o.overlaps(r))
                && (!obs || !obstacles.iter().any(|o| o.overlaps(r)))
        };
        // A leader line must not cross a placed label.
        let leader_clear = |r: &Rect| {
            let (a, b) = leader_line(l.anchor, r, 0.0);
            segment_boxes(a, b, 0.5).iter().all(|s| !placed.iter().any(|p| p.overlaps(s)))
        };
        let mut choice: Option<Placed> = None;
        // In order, first avoiding markers, then allowing one to be covered (never another
        // label): a spot that reads as the label's own; one with a leader line that crosses
        // no label; for labels that must show (roofs), any free spot; last, a leader line
        // that crosses a label.
        #[derive(Clone, Copy, PartialEq)]
        enum Take {
            Own,
            Leader,
            Any,
            AnyLeader,
        }
        let modes = [
            (true, Take::Own),
            (true, Take::Leader),
            (true, Take::Any),
            (false, Take::Own),
            (false, Take::Leader),
            (false, Take::Any),
            (false, Take::AnyLeader),
        ];
        'search: for (avoid_obstacles, take) in modes {
            let order = if matches!(take, Take::Leader | Take::AnyLeader) {
                &by_distance
            } else {
                &spots
            };
            for r in order {
                if !free_of(r, avoid_obstacles) {
                    continue;
                }
                let found = match take {
                    Take::Own => l.reads_as_own(r).then_some(false),
                    Take::Leader => (l.leader && leader_clear(r)).then_some(true),
                    Take::Any => l.ambiguous_ok.then_some(false),
                    Take::AnyLeader => l.leader.then_some(true),
                };
                if let Some(leader) = found {
                    choice = Some(Placed { rect: *r, leader });
                    break 'search;
                }
            }
        }
        if let Some(c) = choice {
            placed.push(c.rect);
            if c.leader {
                let (a, b) = leader_line(l.anchor, &c.rect, 0.0);
                leaders.extend(
                    segment_boxes(a, b, 1.0)
                        .into_iter()
                        .filter(|r| !r.overlaps(&Rect::around(l.anchor.0, l.anchor.1, 6.0))),
                );
            }
        }
        out.push(choice);
    }
    out
}

/// Do any two of these boxes overlap?
pub fn any_overlap(rects: &[Rect]) -> Option<(usize, usize)> {
    for i in 0..rects.len() {
        for j in i + 1..rects.len() {
            if rects[i].overlaps(&rects[j]) {
                return Some((i, j));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// xorshift64*: seeded, fresh seed per run from the clock (printed for reproduction).
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> f64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    #[test]
    fn placed_labels_never_overlap_and_stay_inside() {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
            | 1;
        eprintln!("label placement seed {seed}");
        let mut rng = Rng(seed);
        let area = Rect::new(60.0, 20.0, 700.0, 500.0);
        for _round in 0..20 {
            // clustered anchors: the hard case (many points near one spot)
            let n = 5 + (rng.next() * 30.0) as usize;
            let cx = 100.0 + rng.next() * 500.0;
            let cy = 60.0 + rng.next() * 400.0;
            let labels: Vec<Label> = (0..n)
                .map(|i| {
                    let a = (cx + (rng.next() - 0.5) * 120.0, cy + (rng.next() - 0.5) * 80.0);
                    let w = 30.0 + rng.next() * 90.0;
                    Label::for_marker(format!("p{i}"), a, (w, 13.0), 4.0)
                })
                .collect();
            let anchors: Vec<(f64, f64)> = labels.iter().map(|l| l.anchor).collect();
            let labels: Vec<Label> = labels
                .into_iter()
                .enumerate()
                .map(|(i, l)| {
                    let rivals = anchors.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, a)| *a).collect();
                    l.with_rivals(rivals)
                })
                .collect();
            let obstacles: Vec<Rect> = labels.iter().map(|l| Rect::around(l.anchor.0, l.anchor.1, 4.0)).collect();
            let placed = place(&labels, &obstacles, area);
            let boxes: Vec<Rect> = placed.iter().flatten().map(|p| p.rect).collect();
            // a label without a leader line is near its own anchor and nearer to it than to any other
            for (l, p) in labels.iter().zip(&placed) {
                if let Some(p) = p
                    && !p.leader
                {
                    let own = p.rect.dist(l.anchor);
                    assert!(own <= MARKER_NUDGE, "seed {seed}: '{}' {own:.0} px from its anchor", l.text);
                    assert!(
                        anchors.iter().filter(|a| **a != l.anchor).all(|a| p.rect.dist(*a) > own),
                        "seed {seed}"
                    );
                }
            }
            assert_eq!(any_overlap(&boxes), None, "seed {seed}");
            assert!(boxes.iter().all(|b| b.inside(&area)), "seed {seed}");
            // with room around, nearly all labels find a place
            assert!(boxes.len() * 10 >= n * 9, "only {} of {n} placed (seed {seed})", boxes.len());
        }
    }

    #[test]
    fn colliding_pair_is_nudged_apart() {
        let area = Rect::new(0.0, 0.0, 400.0, 300.0);
        let l = |x| Label::for_marker("label", (x, 150.0), (50.0, 12.0), 3.0);
        let placed = place(&[l(100.0), l(101.0)], &[], area);
        let (a, b) = (placed[0].unwrap().rect, placed[1].unwrap().rect);
        assert!(!a.overlaps(&b));
        // the first keeps its preferred spot, right of its marker
        assert_eq!(a, Rect::new(106.0, 144.0, 50.0, 12.0));
    }
}

#[cfg(test)]
mod leader_tests {
    use super::*;

    #[test]
    fn crowded_marker_gets_a_leader_line_not_a_far_silent_nudge() {
        // A marker boxed in by labels placed before it: its label cannot sit near it, so it
        // goes farther with a leader line rather than silently next to another marker.
        let area = Rect::new(0.0, 0.0, 600.0, 400.0);
        let mut labels = Vec::new();
        // left, right, top, bottom: a ring around (200, 200) with no free spot within 22 px
        let ring = [
            (140.0, 170.0, 38.0, 60.0),
            (222.0, 170.0, 38.0, 60.0),
            (180.0, 150.0, 40.0, 28.0),
            (180.0, 222.0, 40.0, 28.0),
        ];
        for (i, (x, y, w, h)) in ring.into_iter().enumerate() {
            labels.push(Label::free(format!("block{i}"), (x, y), (w, h), vec![(0.0, 0.0)]));
        }
        let own = (200.0, 200.0);
        let rival = (330.0, 200.0);
        labels.push(Label::for_marker("mine", own, (50.0, 12.0), 4.0).with_rivals(vec![rival]));
        let placed = place(
            &labels,
            &[Rect::around(own.0, own.1, 5.0), Rect::around(rival.0, rival.1, 5.0)],
            area,
        );
        let p = placed[4].expect("placed with a leader line");
        assert!(p.leader, "{p:?}");
        assert!(p.rect.dist(own) > MARKER_NUDGE);
        // without the leader option it would be dropped instead of placed far away
        let mut silent = labels[4].clone();
        silent.leader = false;
        labels[4] = silent;
        assert_eq!(place(&labels, &[], area)[4], None);
    }
}
