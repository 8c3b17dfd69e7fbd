//! Fixed colours: one per strategy (the same in every chart memrel draws) and
//! one per phase.

use plotters::style::RGBColor;

use crate::protocol::Phase;
use crate::strategy;

const STRATEGY_COLOURS: &[RGBColor] = &[
    RGBColor(214, 39, 40),   // drop: red, the problem
    RGBColor(31, 119, 180),  // malloc-trim: blue
    RGBColor(44, 160, 44),   // trim-threshold-env: green
    RGBColor(148, 103, 189), // mmap-threshold-env: purple
    RGBColor(140, 86, 75),   // mallopt: brown
    RGBColor(227, 119, 194), // tcache-off: pink
    RGBColor(127, 127, 127), // arena-max-1: grey
    RGBColor(23, 190, 207),  // sync: cyan
    RGBColor(255, 127, 14),  // cache-flush: orange
    RGBColor(188, 189, 34),  // to-cpu: olive
    RGBColor(57, 59, 121),   // device-drop: navy
    RGBColor(0, 0, 0),       // context-release: black
    RGBColor(27, 158, 119),  // jemalloc: teal
    RGBColor(102, 166, 30),  // jemalloc-decay0: lime
    RGBColor(117, 200, 180), // jemalloc-bg-thread: light teal
    RGBColor(0, 90, 70),     // jemalloc-purge: dark teal
    RGBColor(230, 171, 2),   // tcmalloc: mustard
    RGBColor(253, 191, 111), // tcmalloc-release-rate: light orange
    RGBColor(166, 86, 40),   // tcmalloc-aggressive: rust
    RGBColor(255, 217, 47),  // tcmalloc-release: yellow
    RGBColor(117, 112, 179), // mimalloc: slate purple
    RGBColor(231, 41, 138),  // mimalloc-purge0: magenta
    RGBColor(106, 61, 154),  // mimalloc-collect: dark purple
    RGBColor(128, 0, 0),     // respawn: maroon
    RGBColor(251, 154, 153), // gc-collect: light red (drop's kin)
    RGBColor(178, 223, 138), // trim-threshold-inside: light green (trim-threshold-env's kin)
    RGBColor(0, 200, 83),    // empty-cache: vivid green
    RGBColor(0, 0, 205),     // accelerate-release: medium blue
    RGBColor(70, 70, 70),    // ipc-collect: dark grey
    RGBColor(46, 139, 87),   // detach-release: sea green
    RGBColor(255, 20, 147),  // device-reset: deep pink
];

/// The strategy's colour: fixed by its place in the strategy table (one
/// colour per strategy: a test keeps the table as long as the strategies).
pub fn strategy_colour(name: &str) -> RGBColor {
    let index = strategy::all()
        .position(|s| s.name == name)
        .unwrap_or_else(|| {
            // Unknown names (from newer results) still get a stable colour.
            name.bytes().map(usize::from).sum::<usize>()
        });
    STRATEGY_COLOURS[index % STRATEGY_COLOURS.len()]
}

/// Background shading of a phase, `None` for phases left unshaded.
pub fn phase_colour(phase: Phase) -> Option<RGBColor> {
    match phase {
        Phase::Warmup => Some(RGBColor(226, 217, 243)),
        Phase::Baseline => Some(RGBColor(230, 230, 230)),
        Phase::Load => Some(RGBColor(207, 226, 255)),
        Phase::Forward => Some(RGBColor(212, 237, 218)),
        Phase::Unload => Some(RGBColor(248, 215, 218)),
        Phase::Release => Some(RGBColor(255, 222, 160)),
        Phase::Settle => Some(RGBColor(245, 245, 235)),
        Phase::Idle => None,
        Phase::Busy => Some(RGBColor(218, 240, 240)),
    }
}

/// A phase's colour where it stands alone on a thin ribbon (stronger than the shading).
pub fn phase_ribbon_colour(phase: Phase) -> Option<RGBColor> {
    match phase {
        Phase::Warmup => Some(RGBColor(178, 156, 219)),
        Phase::Baseline => Some(RGBColor(190, 190, 190)),
        Phase::Load => Some(RGBColor(116, 164, 235)),
        Phase::Forward => Some(RGBColor(112, 192, 132)),
        Phase::Unload => Some(RGBColor(232, 118, 130)),
        Phase::Release => Some(RGBColor(245, 166, 35)),
        Phase::Settle => Some(RGBColor(222, 222, 200)),
        Phase::Idle => None,
        Phase::Busy => Some(RGBColor(86, 178, 178)),
    }
}

/// `colour` mixed with white: `amount` 0 keeps it, 1 gives white.
pub fn lighten(colour: RGBColor, amount: f64) -> RGBColor {
    let mix = |c: u8| (f64::from(c) + (255.0 - f64::from(c)) * amount).round() as u8;
    RGBColor(mix(colour.0), mix(colour.1), mix(colour.2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_strategy_has_a_colour_of_its_own() {
        assert_eq!(STRATEGY_COLOURS.len(), strategy::all().count());
        let mut colours: Vec<(u8, u8, u8)> =
            STRATEGY_COLOURS.iter().map(|c| (c.0, c.1, c.2)).collect();
        colours.sort_unstable();
        colours.dedup();
        assert_eq!(colours.len(), STRATEGY_COLOURS.len());
    }
}
