//! Running totals of traced work and traffic (whole program, and per function).

use super::classify::{CLASSES, Insn, N_CLASSES, TileConfig, TileOp};

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tally {
    pub instructions: u64,
    /// Operations per class index of [`CLASSES`] (hardware semantics: full width); the
    /// integer classes are operations, not flops.
    pub flops: [u64; N_CLASSES],
    /// Floating-point flops of fused multiply-adds (hardware semantics, part of the FP classes).
    pub fma_flops: u64,
    /// Mask-aware flops (lanes switched off by opmasks left out).
    pub effective: u64,
    /// Mask-aware integer operations.
    pub effective_int: u64,
    /// Masked FP or dot-product instructions whose mask was unknown: `effective` and
    /// `effective_int` are then not reported.
    pub effective_unknown: u64,
    /// AMX instructions run while the tile configuration could not be read: their work and
    /// traffic are not in the tally.
    pub tile_unknown: u64,
    pub core_load: u64,
    pub core_store: u64,
    pub stack: u64,
    pub nt_store: u64,
    pub prefetch: u64,
    pub unclassified: u64,
    /// Masked memory operands whose mask was unknown (counted at full width).
    pub mask_unknown_mem: u64,
}

impl Tally {
    /// Floating-point work (the integer classes left out).
    pub fn flops_total(&self) -> u64 {
        self.flops
            .iter()
            .zip(CLASSES)
            .filter(|(_, c)| !c.is_integer())
            .map(|(v, _)| v)
            .sum()
    }

    /// Integer operations (VNNI, AMX int8).
    pub fn int_ops_total(&self) -> u64 {
        self.flops.iter().zip(CLASSES).filter(|(_, c)| c.is_integer()).map(|(v, _)| v).sum()
    }

    pub fn add_scaled(&mut self, o: &Tally, n: u64) {
        self.instructions += o.instructions * n;
        for (a, b) in self.flops.iter_mut().zip(o.flops.iter()) {
            *a += b * n;
        }
        self.fma_flops += o.fma_flops * n;
        self.effective += o.effective * n;
        self.effective_int += o.effective_int * n;
        self.effective_unknown += o.effective_unknown * n;
        self.tile_unknown += o.tile_unknown * n;
        self.core_load += o.core_load * n;
        self.core_store += o.core_store * n;
        self.stack += o.stack * n;
        self.nt_store += o.nt_store * n;
        self.prefetch += o.prefetch * n;
        self.unclassified += o.unclassified * n;
        self.mask_unknown_mem += o.mask_unknown_mem * n;
    }

    /// What was added since `earlier` (a copy of this tally taken before).
    pub fn since(&self, earlier: &Tally) -> Tally {
        let mut flops = [0u64; N_CLASSES];
        for (d, (a, b)) in flops.iter_mut().zip(self.flops.iter().zip(earlier.flops.iter())) {
            *d = a.saturating_sub(*b);
        }
        Tally {
            instructions: self.instructions.saturating_sub(earlier.instructions),
            flops,
            fma_flops: self.fma_flops.saturating_sub(earlier.fma_flops),
            effective: self.effective.saturating_sub(earlier.effective),
            effective_int: self.effective_int.saturating_sub(earlier.effective_int),
            effective_unknown: self.effective_unknown.saturating_sub(earlier.effective_unknown),
            tile_unknown: self.tile_unknown.saturating_sub(earlier.tile_unknown),
            core_load: self.core_load.saturating_sub(earlier.core_load),
            core_store: self.core_store.saturating_sub(earlier.core_store),
            stack: self.stack.saturating_sub(earlier.stack),
            nt_store: self.nt_store.saturating_sub(earlier.nt_store),
            prefetch: self.prefetch.saturating_sub(earlier.prefetch),
            unclassified: self.unclassified.saturating_sub(earlier.unclassified),
            mask_unknown_mem: self.mask_unknown_mem.saturating_sub(earlier.mask_unknown_mem),
        }
    }

    /// Add one execution of `insn`. `mask`: the value of its opmask register where it has one
    /// (None = unknown). String instructions are added separately (per iteration).
    pub fn add_insn(&mut self, insn: &Insn, mask: Option<u64>) {
        self.instructions += 1;
        if insn.unclassified {
            self.unclassified += 1;
        }
        if insn.prefetch {
            self.prefetch += 64;
        }
        if let Some(f) = insn.flop {
            self.flops[f.class] += f.flops();
            if f.fma && !f.integer() {
                self.fma_flops += f.flops();
            }
            let effective = match (insn.mask, mask) {
                (None, _) => f.flops(),
                (Some(_), Some(m)) => u64::from(active(m, f.lanes)) * u64::from(f.per_lane),
                (Some(_), None) => {
                    self.effective_unknown += 1;
                    0
                }
            };
            if f.integer() {
                self.effective_int += effective;
            } else {
                self.effective += effective;
            }
        }
        for m in &insn.mem {
            let bytes = if m.per_mask_element {
                match mask {
                    Some(k) => u64::from(active(k, m.elems)) * u64::from(m.elem),
                    None => {
                        self.mask_unknown_mem += 1;
                        m.bytes()
                    }
                }
            } else {
                m.bytes()
            };
            if m.stack {
                self.stack += bytes * (u64::from(m.load) + u64::from(m.store));
            } else {
                if m.load {
                    self.core_load += bytes;
                }
                if m.store {
                    self.core_store += bytes;
                    if m.nt {
                        self.nt_store += bytes;
                    }
                }
            }
        }
    }

    /// The work and traffic of one execution of an AMX instruction under the tile
    /// configuration `cfg` (None: it could not be read; counted in `tile_unknown`). The
    /// instruction itself is counted by [`Tally::add_insn`].
    pub fn add_tile(&mut self, insn: &Insn, cfg: Option<&TileConfig>) {
        let Some(op) = insn.tile.filter(|t| t.shaped()) else { return };
        let Some(cfg) = cfg else {
            self.tile_unknown += 1;
            return;
        };
        match op {
            TileOp::Dot { class, dst, a, per_k } => {
                let ops = cfg.dot_ops(dst, a, per_k);
                self.flops[class] += ops;
                if CLASSES[class].is_integer() {
                    self.effective_int += ops;
                } else {
                    self.effective += ops;
                }
            }
            TileOp::Load { tile, stack } | TileOp::Store { tile, stack } => {
                let bytes = cfg.moved_bytes(tile);
                if stack {
                    self.stack += bytes;
                } else if matches!(op, TileOp::Load { .. }) {
                    self.core_load += bytes;
                } else {
                    self.core_store += bytes;
                }
            }
            TileOp::Configure | TileOp::Other => {}
        }
    }

    /// `iterations` iterations of a string instruction.
    pub fn add_string(&mut self, insn: &Insn, iterations: u64) {
        if let Some(s) = insn.string {
            self.core_load += iterations * u64::from(s.elem) * u64::from(s.loads);
            self.core_store += iterations * u64::from(s.elem) * u64::from(s.stores);
        }
    }
}

/// Lanes of `lanes` switched on by mask `m`.
pub fn active(m: u64, lanes: u32) -> u32 {
    let lm = if lanes >= 64 { u64::MAX } else { (1u64 << lanes) - 1 };
    (m & lm).count_ones()
}

/// Name of a class index.
pub fn class_key(i: usize) -> &'static str {
    CLASSES[i].key()
}
