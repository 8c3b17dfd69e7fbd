//! Fixed colours: one per strategy (the same in every chart memrel draws),
//! one per phase, and one per mechanism that holds retained memory.

use plotters::style::RGBColor;

use crate::metrics::why::Mechanism;
use crate::protocol::Phase;

/// Each strategy's colour, by name: a strategy keeps its colour whatever is
/// added to the strategy list or however it is ordered. A new strategy gets a
/// line here (the completeness test below says so); names not here (results
/// from a newer memrel, user-named runs) get a [`FALLBACK_COLOURS`] colour.
const STRATEGY_COLOURS: &[(&str, RGBColor)] = &[
    ("drop", RGBColor(214, 39, 40)),                 // red, the problem
    ("malloc-trim", RGBColor(31, 119, 180)),         // blue
    ("trim-threshold-env", RGBColor(44, 160, 44)),   // green
    ("mmap-threshold-env", RGBColor(148, 103, 189)), // purple
    ("mallopt", RGBColor(140, 86, 75)),              // brown
    ("tcache-off", RGBColor(227, 119, 194)),         // pink
    ("arena-max-1", RGBColor(127, 127, 127)),        // grey
    ("sync", RGBColor(23, 190, 207)),                // cyan
    ("cache-flush", RGBColor(255, 127, 14)),         // orange
    ("to-cpu", RGBColor(188, 189, 34)),              // olive
    ("device-drop", RGBColor(57, 59, 121)),          // navy
    ("context-release", RGBColor(0, 0, 0)),          // black
    ("jemalloc", RGBColor(27, 158, 119)),            // teal
    ("jemalloc-decay0", RGBColor(102, 166, 30)),     // lime
    ("jemalloc-bg-thread", RGBColor(117, 200, 180)), // light teal
    ("jemalloc-purge", RGBColor(0, 90, 70)),         // dark teal
    ("tcmalloc", RGBColor(230, 171, 2)),             // mustard
    ("tcmalloc-release-rate", RGBColor(253, 191, 111)), // light orange
    ("tcmalloc-aggressive", RGBColor(166, 86, 40)),  // rust
    ("tcmalloc-release", RGBColor(255, 217, 47)),    // yellow
    ("mimalloc", RGBColor(117, 112, 179)),           // slate purple
    ("mimalloc-purge0", RGBColor(231, 41, 138)),     // magenta
    ("mimalloc-collect", RGBColor(106, 61, 154)),    // dark purple
    ("respawn", RGBColor(128, 0, 0)),                // maroon
    ("offload", RGBColor(65, 105, 225)),             // royal blue
    ("offload-pinned", RGBColor(218, 112, 214)),     // orchid
    ("reload", RGBColor(210, 105, 30)),              // chocolate
    ("gc-collect", RGBColor(251, 154, 153)),         // light red (drop's kin)
    ("trim-threshold-inside", RGBColor(178, 223, 138)), // light green (trim-threshold-env's kin)
    ("empty-cache", RGBColor(0, 200, 83)),           // vivid green
    ("host-empty-cache", RGBColor(255, 140, 180)),   // pink
    ("accelerate-release", RGBColor(0, 0, 205)),     // medium blue
    ("ipc-collect", RGBColor(70, 70, 70)),           // dark grey
    ("detach-release", RGBColor(46, 139, 87)),       // sea green
    ("device-reset", RGBColor(255, 20, 147)),        // deep pink
    ("destroy-pg", RGBColor(139, 0, 139)),           // dark magenta
    ("destroy-pg-empty-cache", RGBColor(0, 100, 0)), // dark green
    ("fadvise-dontneed", RGBColor(32, 178, 170)),    // light sea green
    ("read-load", RGBColor(184, 134, 11)),           // dark goldenrod
    ("ort-arena", RGBColor(112, 128, 144)),          // slate grey
    ("ort-no-arena", RGBColor(220, 20, 60)),         // crimson
    ("ort-shrink", RGBColor(0, 191, 255)),           // deep sky blue
    ("ort-same-as-requested", RGBColor(154, 205, 50)), // yellow green
    ("xla-no-prealloc", RGBColor(255, 99, 71)),      // tomato
    ("xla-platform-allocator", RGBColor(75, 0, 130)), // indigo
    ("xla-mem-fraction", RGBColor(244, 164, 96)),    // sandy brown
    ("jax-clear", RGBColor(0, 255, 127)),            // spring green
];

/// Colours for names not in [`STRATEGY_COLOURS`], picked by a stable hash of
/// the name: none of them is a mapped strategy's colour.
const FALLBACK_COLOURS: &[RGBColor] = &[
    RGBColor(0, 128, 128),  // teal blue
    RGBColor(153, 102, 0),  // ochre
    RGBColor(102, 0, 153),  // violet
    RGBColor(0, 102, 204),  // azure
    RGBColor(204, 85, 0),   // burnt orange
    RGBColor(85, 107, 47),  // dark olive
    RGBColor(199, 21, 133), // medium violet red
    RGBColor(72, 61, 139),  // dark slate blue
    RGBColor(139, 69, 19),  // saddle brown
    RGBColor(0, 139, 139),  // dark cyan
    RGBColor(160, 82, 45),  // sienna
    RGBColor(95, 158, 160), // cadet blue
];

/// The strategy's colour: its own from [`STRATEGY_COLOURS`] (a strategy
/// with a value, `xla-mem-fraction=0.40`, has its family's); for a name not
/// there, a fallback colour fixed by the name's FNV-1a hash (the same name
/// gets the same colour in every chart and every memrel version).
pub fn strategy_colour(name: &str) -> RGBColor {
    let family = crate::strategy::family(name);
    if let Some((_, colour)) = STRATEGY_COLOURS.iter().find(|(n, _)| *n == family) {
        return *colour;
    }
    let hash = crate::fsutil::fnv1a64(name.bytes());
    FALLBACK_COLOURS[(hash % FALLBACK_COLOURS.len() as u64) as usize]
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
        Phase::Sleep => Some(RGBColor(236, 214, 236)),
        Phase::Asleep => Some(RGBColor(224, 224, 244)),
        Phase::Wake => Some(RGBColor(255, 236, 200)),
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
        Phase::Sleep => Some(RGBColor(176, 96, 176)),
        Phase::Asleep => Some(RGBColor(120, 120, 200)),
        Phase::Wake => Some(RGBColor(224, 160, 48)),
    }
}

/// A mechanism's colour (`why.png`): the same mechanism the same colour in
/// every chart, its class told by the hue family: live in reds and oranges
/// (only the program frees it), free but kept in blues (a knob frees it),
/// the floor in mid greys, what is not split in light greys.
pub fn mechanism_colour(mechanism: Mechanism) -> RGBColor {
    match mechanism {
        // Live.
        Mechanism::LiveHeap => RGBColor(217, 72, 1),
        Mechanism::PinnedTensors => RGBColor(251, 106, 74),
        Mechanism::SharedMemory => RGBColor(165, 15, 21),
        Mechanism::MappedWeights => RGBColor(253, 174, 107),
        Mechanism::TorchTensors => RGBColor(230, 85, 13),
        Mechanism::JaxArrays => RGBColor(203, 24, 29),
        // Free but kept.
        Mechanism::FreeChunks => RGBColor(33, 113, 181),
        Mechanism::PinnedCache => RGBColor(107, 174, 214),
        Mechanism::TorchCache => RGBColor(8, 69, 148),
        Mechanism::JaxPool => RGBColor(66, 146, 198),
        Mechanism::PageCache => RGBColor(158, 202, 225),
        // Floor.
        Mechanism::Context => RGBColor(99, 99, 99),
        Mechanism::Code => RGBColor(150, 150, 150),
        // Not split.
        Mechanism::OtherAnon => RGBColor(204, 204, 204),
        Mechanism::Pinned => RGBColor(216, 210, 196),
        Mechanism::Rest => RGBColor(230, 230, 230),
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
    use crate::strategy;

    fn rgb(c: RGBColor) -> (u8, u8, u8) {
        (c.0, c.1, c.2)
    }

    #[test]
    fn every_strategy_has_a_colour_of_its_own() {
        for s in strategy::all() {
            assert!(
                STRATEGY_COLOURS.iter().any(|(n, _)| *n == s.name),
                "strategy {} has no colour in STRATEGY_COLOURS",
                s.name
            );
        }
        for (name, _) in STRATEGY_COLOURS {
            assert!(
                strategy::all().any(|s| s.name == *name),
                "{name} in STRATEGY_COLOURS is no strategy"
            );
        }
        let mut all: Vec<(u8, u8, u8)> = STRATEGY_COLOURS
            .iter()
            .map(|(_, c)| rgb(*c))
            .chain(FALLBACK_COLOURS.iter().map(|c| rgb(*c)))
            .collect();
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), n, "two colours are the same");
    }

    #[test]
    fn each_mechanism_has_its_own_colour_in_its_class_hue() {
        use crate::metrics::why::Class;
        let mut all: Vec<(u8, u8, u8)> = Mechanism::ALL
            .iter()
            .map(|m| rgb(mechanism_colour(*m)))
            .collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(
            all.len(),
            Mechanism::ALL.len(),
            "two mechanisms share a colour"
        );
        for m in Mechanism::ALL {
            let (r, g, b) = rgb(mechanism_colour(m));
            let (r, g, b) = (i32::from(r), i32::from(g), i32::from(b));
            let grey = (r - g).abs() <= 20 && (g - b).abs() <= 30 && (r - b).abs() <= 30;
            match m.class() {
                Class::Live => assert!(r > g && r > b + 60, "{m:?} is not warm"),
                Class::FreeKept => assert!(b > r + 60 && b > g, "{m:?} is not blue"),
                Class::Floor => assert!(grey && r < 170, "{m:?} is not a mid grey"),
                Class::Unsplit => assert!(grey && r >= 190, "{m:?} is not a light grey"),
            }
        }
    }

    #[test]
    fn colours_are_by_name_not_by_place() {
        // The colours the committed charts were drawn with.
        assert_eq!(rgb(strategy_colour("drop")), (214, 39, 40));
        assert_eq!(rgb(strategy_colour("malloc-trim")), (31, 119, 180));
        assert_eq!(rgb(strategy_colour("jemalloc")), (27, 158, 119));
        assert_eq!(rgb(strategy_colour("device-reset")), (255, 20, 147));
    }

    #[test]
    fn a_strategy_with_a_value_has_its_familys_colour() {
        let family = rgb(strategy_colour("xla-mem-fraction"));
        assert_eq!(family, (244, 164, 96));
        assert_eq!(rgb(strategy_colour("xla-mem-fraction=0.40")), family);
        assert_eq!(rgb(strategy_colour("xla-mem-fraction=1")), family);
    }

    #[test]
    fn an_unknown_name_gets_a_stable_fallback_colour() {
        let c = strategy_colour("my-own-release");
        assert_eq!(rgb(c), rgb(strategy_colour("my-own-release")));
        assert!(FALLBACK_COLOURS.iter().any(|f| rgb(*f) == rgb(c)));
        assert!(STRATEGY_COLOURS.iter().all(|(_, m)| rgb(*m) != rgb(c)));
    }
}
