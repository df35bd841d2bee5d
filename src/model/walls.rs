//! The instruction roofline's memory walls (Ding & Williams): how many transactions a warp's
//! memory instruction takes at best and at worst, and where a kernel's figure sits among them.
//! Owned by the model (the GPU model and ncu's import place points against them, the
//! instruction-roofline view draws them); the light build keeps them for that view.

/// Global-memory walls in sectors per warp-level global instruction: 1 (every thread the
/// same address), 4 (unit-stride 4-byte), 8 (unit-stride 8-byte), 32 (fully uncoalesced).
pub const GLOBAL_WALLS: [f64; 4] = [1.0, 4.0, 8.0, 32.0];
/// Shared-memory walls in wavefronts per shared instruction: 1 (no bank conflict), 32 (every
/// thread of the warp in one bank).
pub const SHARED_WALLS: [f64; 2] = [1.0, 32.0];

/// Where `x` (transactions per instruction) sits among `walls` (ascending): on a wall when
/// within 3 % of it, else between two walls, below the first or above the last.
pub fn wall_position(x: f64, walls: &[f64]) -> serde_json::Value {
    if let Some(w) = walls.iter().find(|w| (x - **w).abs() <= 0.03 * **w) {
        return serde_json::json!({"on_wall": w, "text": format!("on the {w} wall")});
    }
    let below = walls.iter().rev().find(|w| **w < x).copied();
    let above = walls.iter().find(|w| **w > x).copied();
    let text = match (below, above) {
        (Some(b), Some(a)) => format!("between the {b} and {a} walls"),
        (None, Some(a)) => format!("below the {a} wall"),
        (Some(b), None) => format!("beyond the {b} wall"),
        (None, None) => "no walls".to_string(),
    };
    serde_json::json!({"between": [below, above], "text": text})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_against_the_walls() {
        // 8.0 and 7.8 (within 3 %) sit on the 8 wall; 6 between 4 and 8; 0.5 below 1; 40 beyond 32.
        assert_eq!(wall_position(8.0, &GLOBAL_WALLS)["on_wall"], 8.0);
        assert_eq!(wall_position(7.8, &GLOBAL_WALLS)["on_wall"], 8.0);
        assert_eq!(wall_position(6.0, &GLOBAL_WALLS)["between"], serde_json::json!([4.0, 8.0]));
        assert_eq!(wall_position(6.0, &GLOBAL_WALLS)["text"], "between the 4 and 8 walls");
        assert_eq!(wall_position(0.5, &GLOBAL_WALLS)["text"], "below the 1 wall");
        assert_eq!(wall_position(40.0, &SHARED_WALLS)["text"], "beyond the 32 wall");
        assert_eq!(wall_position(2.0, &SHARED_WALLS)["between"], serde_json::json!([1.0, 32.0]));
    }
}
