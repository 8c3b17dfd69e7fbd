//! The key under the lanes of `compare.png`: what each swatch is (the
//! resources' fills, then the phases the drawn runs went through), laid out
//! in rows that fit the plot's width. Draws only, as the rest of the chart.

use super::*;
use crate::metrics::resource::Draw;
use crate::metrics::ResourceFacts;

/// The lane key's entries: a swatch and its text, the resources' first, then
/// the phases the drawn runs went through (`None` before "phases:").
pub(super) fn key_items(lines: &[Line], resources: &[Resource]) -> Vec<(Option<RGBColor>, String)> {
    let grey = RGBColor(120, 120, 120);
    let mut items: Vec<(Option<RGBColor>, String)> = Vec::new();
    // Every line from process trees: "process tree", else one process.
    let tree = !lines.is_empty()
        && lines
            .iter()
            .all(|l| crate::sampler::is_tree(&l.header.sampler));
    for r in resources {
        let look = r.look();
        if look.draw == Draw::Stacked {
            let fills = [0.25, 0.7];
            for (p, fill) in look.parts.iter().zip(fills) {
                items.push((Some(lighten(grey, fill)), p.key.into()));
            }
        } else if look.scoped {
            let scope = crate::sampler::vram_scope(tree);
            items.push((
                Some(lighten(grey, 0.45)),
                format!("{} ({scope})", look.name),
            ));
        } else {
            items.push((Some(lighten(grey, 0.45)), look.name));
        }
    }
    items.push((None, "phases:".into()));
    for phase in Phase::ALL {
        let Some(shade) = phase_ribbon_colour(phase) else {
            continue;
        };
        let present = lines
            .iter()
            .any(|l| l.run.events.iter().any(|e| e.edge.phase == phase));
        if present {
            items.push((Some(shade), phase.as_str().to_string()));
        }
    }
    items
}

pub(super) const KEY_FONT_PX: u32 = 15;
pub(super) const KEY_ROW_PX: u32 = 24;
pub(super) const KEY_LEFT: u32 = Y_LABEL_AREA + MARGIN;
/// Room kept free at the image's right edge.
pub(super) const KEY_RIGHT_PAD: u32 = 8;

/// Where each key item goes: `(x of its swatch or text, row)`, measured with
/// the font the key is drawn in and wrapped to a new row before an item
/// would run past the image's right edge.
pub(super) fn key_layout(items: &[(Option<RGBColor>, String)]) -> Vec<(u32, u32)> {
    let mut out = Vec::with_capacity(items.len());
    let (mut x, mut row) = (KEY_LEFT, 0);
    for (swatch, text) in items {
        let width = key_item_width(swatch.is_some(), text);
        if x > KEY_LEFT && x + width > frame::WIDTH - KEY_RIGHT_PAD {
            x = KEY_LEFT;
            row += 1;
        }
        out.push((x, row));
        x += width + 22;
    }
    out
}

/// An item's width: its swatch (22 px and a 6 px gap), then its text.
pub(super) fn key_item_width(swatch: bool, text: &str) -> u32 {
    (if swatch { 28 } else { 0 }) + text_width(text, KEY_FONT_PX)
}

/// The key band's height for `items`: one row, or as many as they wrap to.
pub(super) fn key_height(items: &[(Option<RGBColor>, String)]) -> u32 {
    let rows = key_layout(items)
        .iter()
        .map(|(_, r)| r + 1)
        .max()
        .unwrap_or(1);
    KEY_HEIGHT + KEY_ROW_PX * (rows - 1)
}

/// The lane key and phase colours at the bottom, in rows that fit the width.
pub(super) fn draw_key(area: &Area, items: &[(Option<RGBColor>, String)]) -> Result<()> {
    let font = (FONT, KEY_FONT_PX).into_font().color(&BLACK);
    for ((swatch, text), (x, row)) in items.iter().zip(key_layout(items)) {
        let (x, y) = (x as i32, 8 + (KEY_ROW_PX * row) as i32);
        let text_x = match swatch {
            Some(c) => {
                area.draw(&Rectangle::new([(x, y), (x + 22, y + 16)], c.filled()))
                    .map_err(plot_err)?;
                x + 28
            }
            None => x,
        };
        area.draw_text(text, &font, (text_x, y)).map_err(plot_err)?;
    }
    Ok(())
}
