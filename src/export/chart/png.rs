//! What every PNG memrel draws shares: the embedded font, writing a PNG so a
//! reader never sees half a file, a legend drawn into its own strip beside the
//! plot (never over the data), and plotters' errors turned into ours.
//!
//! Nothing here knows about records or metrics.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Once;

use anyhow::{anyhow, Context, Result};
use plotters::coord::Shift;
use plotters::prelude::*;

pub const FONT: &str = "sans-serif";
static FONT_ONCE: Once = Once::new();

/// Width of the legend strip to the right of every plot.
pub const LEGEND_WIDTH: u32 = 300;

pub type Area<'a> = DrawingArea<BitMapBackend<'a>, Shift>;

/// Registers the embedded DejaVu Sans as plotters' sans-serif font.
pub fn register_font() {
    FONT_ONCE.call_once(|| {
        let bytes: &'static [u8] = include_bytes!("../../../assets/DejaVuSans.ttf");
        // The embedded font is valid; a failure here would only lose text.
        let _ = plotters::style::register_font(FONT, FontStyle::Normal, bytes);
        let _ = plotters::style::register_font(FONT, FontStyle::Bold, bytes);
    });
}

/// Draws a `width`×`height` PNG with `draw` into memory, encodes it and moves
/// it into place at `path` through a hidden temporary file in the same
/// directory (removed if anything fails), so a reader never sees half a file.
pub fn write_png(
    path: &Path,
    width: u32,
    height: u32,
    draw: impl FnOnce(&Area) -> Result<()>,
) -> Result<()> {
    register_font();
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut rgb = vec![255u8; width as usize * height as usize * 3];
    let drawn = (|| {
        let root = BitMapBackend::with_buffer(&mut rgb, (width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        draw(&root)?;
        root.present().map_err(plot_err)
    })();
    drawn.with_context(|| format!("cannot draw {}", path.display()))?;
    // 0o666 less the umask, as a file created with File::create would be.
    let tmp = tempfile::Builder::new()
        .prefix(".memrel-chart")
        .suffix(".png")
        .permissions(std::fs::Permissions::from_mode(0o666))
        .tempfile_in(dir)
        .with_context(|| format!("cannot create a temporary file in {}", dir.display()))?;
    encode_png(tmp.as_file(), width, height, &rgb)
        .with_context(|| format!("cannot write {}", path.display()))?;
    tmp.persist(path)
        .with_context(|| format!("cannot move {} into place", path.display()))?;
    Ok(())
}

/// Encodes 8-bit RGB pixels as PNG with the settings plotters' own file
/// output used (through the image crate: fast compression, adaptive
/// filtering), so charts are byte-identical to those it wrote. The png crate
/// directly, not the image crate: memrel only ever writes one PNG format, and
/// image was the largest crate in the build that memrel did not need.
fn encode_png(file: &std::fs::File, width: u32, height: u32, rgb: &[u8]) -> Result<()> {
    let mut encoder = png::Encoder::new(std::io::BufWriter::new(file), width, height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.set_compression(png::Compression::Fast);
    encoder.set_filter(png::FilterType::Sub);
    encoder.set_adaptive_filter(png::AdaptiveFilterType::Adaptive);
    let mut writer = encoder.write_header()?;
    writer.write_image_data(rgb)?;
    writer.finish()?;
    Ok(())
}

/// The width in pixels of `text` drawn in the chart font at `size` px: the
/// same metrics the drawing uses (plotters lays text out with this font).
pub fn text_width(text: &str, size: u32) -> u32 {
    register_font();
    (FONT, size as f64)
        .into_font()
        .box_size(text)
        .map(|(w, _)| w)
        // Without the font's metrics, a generous guess per character.
        .unwrap_or_else(|_| size * text.chars().count() as u32)
}

/// `text` broken at spaces into lines that each fit `max_px` in the chart
/// font at `size` px; a single word wider than that is broken between
/// characters, so no line ever runs past `max_px`.
pub fn wrap_text(text: &str, size: u32, max_px: u32) -> Vec<String> {
    if text_width(text, size) <= max_px {
        return vec![text.to_string()];
    }
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split(' ') {
        let candidate = if line.is_empty() {
            word.to_string()
        } else {
            format!("{line} {word}")
        };
        if text_width(&candidate, size) <= max_px {
            line = candidate;
            continue;
        }
        if !line.is_empty() {
            lines.push(std::mem::take(&mut line));
        }
        // The word alone: split it between characters where it is too wide.
        for c in word.chars() {
            let mut longer = line.clone();
            longer.push(c);
            if !line.is_empty() && text_width(&longer, size) > max_px {
                lines.push(std::mem::take(&mut line));
                line.push(c);
            } else {
                line = longer;
            }
        }
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// Where legend text starts in its strip, and the widest it may be.
const LEGEND_X: u32 = 10;
const SWATCH_TEXT_X: u32 = LEGEND_X + 32;
/// Room kept free at the strip's right edge.
const LEGEND_RIGHT_PAD: u32 = 6;

/// The lines `entry` is drawn as: `(text lines, detail lines)`, each wrapped
/// to fit a legend strip [`LEGEND_WIDTH`] wide.
pub fn legend_lines(entry: &LegendEntry) -> (Vec<String>, Vec<String>) {
    let (x, size) = match entry.swatch {
        Swatch::Heading | Swatch::Text => (LEGEND_X, 15),
        _ => (SWATCH_TEXT_X, 15),
    };
    let max = LEGEND_WIDTH - x - LEGEND_RIGHT_PAD;
    let text = if entry.text.is_empty() {
        vec![String::new()]
    } else {
        wrap_text(&entry.text, size, max)
    };
    let detail = entry
        .detail
        .iter()
        .flat_map(|d| d.lines())
        .flat_map(|l| wrap_text(l, 12, LEGEND_WIDTH - SWATCH_TEXT_X - LEGEND_RIGHT_PAD))
        .collect();
    (text, detail)
}

/// The right edge in pixels (from the strip's left) of the widest text
/// [`draw_legend`] draws for `entries`.
pub fn legend_right_edge(entries: &[LegendEntry]) -> u32 {
    entries
        .iter()
        .flat_map(|e| {
            let (text, detail) = legend_lines(e);
            let x = match e.swatch {
                Swatch::Heading | Swatch::Text => LEGEND_X,
                _ => SWATCH_TEXT_X,
            };
            let text = text.into_iter().map(move |t| x + text_width(&t, 15));
            let detail = detail
                .into_iter()
                .map(|d| SWATCH_TEXT_X + text_width(&d, 12));
            text.chain(detail).collect::<Vec<_>>()
        })
        .max()
        .unwrap_or(0)
}

pub fn plot_err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("cannot draw the chart: {e:?}")
}

/// How one legend entry is drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Swatch {
    /// A section title in bold, no swatch.
    Heading,
    /// Plain text, no swatch.
    Text,
    Fill(RGBColor),
    Line(RGBColor, u32),
    Dashed(RGBColor, u32),
    /// A dot on a short line with an error bar: a median and its range.
    Marker(RGBColor),
}

#[derive(Debug, Clone, PartialEq)]
pub struct LegendEntry {
    pub swatch: Swatch,
    pub text: String,
    /// Optional lines under the text, smaller and grey (`\n` separates lines).
    pub detail: Option<String>,
}

impl LegendEntry {
    pub fn new(swatch: Swatch, text: impl Into<String>) -> LegendEntry {
        LegendEntry {
            swatch,
            text: text.into(),
            detail: None,
        }
    }

    pub fn with_detail(mut self, detail: impl Into<String>) -> LegendEntry {
        self.detail = Some(detail.into());
        self
    }
}

/// The height `draw_legend` gives `entries`, in pixels (without its top offset).
pub fn legend_height(entries: &[LegendEntry]) -> u32 {
    let mut y = 0;
    for (i, entry) in entries.iter().enumerate() {
        let (text, detail) = legend_lines(entry);
        let more = 20 * (text.len().max(1) as u32 - 1);
        y += more
            + match entry.swatch {
                Swatch::Heading => 22 + if i > 0 { 6 } else { 0 },
                Swatch::Text => 20,
                _ => {
                    21 + if entry.detail.is_some() {
                        16 * detail.len() as u32 + 2
                    } else {
                        0
                    }
                }
            };
    }
    y
}

/// Draws `entries` top-down into `area` (a strip beside a plot), starting `top` px down.
pub fn draw_legend(area: &Area, top: i32, entries: &[LegendEntry]) -> Result<()> {
    let text = (FONT, 15).into_font().color(&BLACK);
    let heading = (FONT, 15).into_font().style(FontStyle::Bold).color(&BLACK);
    let detail = (FONT, 12).into_font().color(&RGBColor(90, 90, 90));
    let mut y = top;
    for entry in entries {
        let x = LEGEND_X as i32;
        let mid = y + 8;
        // Every line wrapped to the strip: a legend is never clipped.
        let (lines, details) = legend_lines(entry);
        match entry.swatch {
            Swatch::Heading => {
                if y > top {
                    y += 6;
                }
                for (i, line) in lines.iter().enumerate() {
                    if i > 0 {
                        y += 20;
                    }
                    area.draw_text(line, &heading, (x, y)).map_err(plot_err)?;
                }
                y += 22;
                continue;
            }
            Swatch::Text => {
                for line in &lines {
                    area.draw_text(line, &text, (x, y)).map_err(plot_err)?;
                    y += 20;
                }
                continue;
            }
            Swatch::Fill(c) => {
                area.draw(&Rectangle::new(
                    [(x, mid - 7), (x + 22, mid + 7)],
                    c.filled(),
                ))
                .map_err(plot_err)?;
            }
            Swatch::Line(c, w) => {
                area.draw(&PathElement::new(
                    vec![(x, mid), (x + 22, mid)],
                    c.stroke_width(w),
                ))
                .map_err(plot_err)?;
            }
            Swatch::Dashed(c, w) => {
                for dash in [(x, x + 6), (x + 9, x + 14), (x + 17, x + 22)] {
                    area.draw(&PathElement::new(
                        vec![(dash.0, mid), (dash.1, mid)],
                        c.stroke_width(w),
                    ))
                    .map_err(plot_err)?;
                }
            }
            Swatch::Marker(c) => {
                area.draw(&PathElement::new(
                    vec![(x + 11, mid - 8), (x + 11, mid + 8)],
                    c.stroke_width(2),
                ))
                .map_err(plot_err)?;
                area.draw(&PathElement::new(
                    vec![(x, mid), (x + 22, mid)],
                    c.stroke_width(2),
                ))
                .map_err(plot_err)?;
                area.draw(&Circle::new((x + 11, mid), 4, c.filled()))
                    .map_err(plot_err)?;
            }
        }
        for (i, line) in lines.iter().enumerate() {
            if i > 0 {
                y += 20;
            }
            area.draw_text(line, &text, (SWATCH_TEXT_X as i32, y))
                .map_err(plot_err)?;
        }
        y += 21;
        if entry.detail.is_some() {
            for line in &details {
                area.draw_text(line, &detail, (SWATCH_TEXT_X as i32, y - 2))
                    .map_err(plot_err)?;
                y += 16;
            }
            y += 2;
        }
    }
    Ok(())
}

/// Places labels along one row from left to right, leaving out any that would
/// run into the one before it; takes `(x px, text)` and returns the kept indices.
pub fn non_overlapping(labels: &[(i32, String)], char_width_px: i32, gap_px: i32) -> Vec<usize> {
    let mut kept = Vec::new();
    let mut free_from = i32::MIN;
    for (i, (x, text)) in labels.iter().enumerate() {
        if *x < free_from {
            continue;
        }
        free_from = x + char_width_px * text.chars().count() as i32 + gap_px;
        kept.push(i);
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_labels_are_dropped_not_drawn_on_top() {
        let labels = [
            (0, "cycle 1".to_string()),
            (30, "cycle 2".to_string()),
            (100, "cycle 3".to_string()),
        ];
        assert_eq!(non_overlapping(&labels, 8, 6), vec![0, 2]);
    }

    #[test]
    fn the_legend_height_counts_headings_details_and_text() {
        let entries = [
            LegendEntry::new(Swatch::Heading, "a"),
            LegendEntry::new(Swatch::Line(BLACK, 1), "b").with_detail("x\ny"),
            LegendEntry::new(Swatch::Heading, ""),
            LegendEntry::new(Swatch::Text, "c"),
        ];
        assert_eq!(legend_height(&entries), 22 + (21 + 34) + 28 + 20);
    }

    #[test]
    fn a_png_is_moved_into_place_and_no_temporary_file_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.png");
        write_png(&path, 40, 30, |root| {
            root.draw(&Rectangle::new([(0, 0), (10, 10)], RED.filled()))
                .map_err(plot_err)?;
            Ok(())
        })
        .unwrap();
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec!["x.png".to_string()]);
        assert_eq!(&std::fs::read(&path).unwrap()[1..4], b"PNG");
    }

    #[test]
    fn a_failed_drawing_leaves_neither_the_png_nor_a_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.png");
        let err = write_png(&path, 40, 30, |_| Err(anyhow!("no data"))).unwrap_err();
        assert!(format!("{err:#}").contains("cannot draw"), "{err:#}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
