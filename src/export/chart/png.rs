//! What every PNG memrel draws shares: the embedded font, writing a PNG so a
//! reader never sees half a file, a legend drawn into its own strip beside the
//! plot (never over the data), and plotters' errors turned into ours.
//!
//! Nothing here knows about records or metrics.

use std::collections::HashMap;
use std::io::Write;
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
    let rgb =
        draw_rgb(width, height, draw).with_context(|| format!("cannot draw {}", path.display()))?;
    // 0o666 less the umask, as a file created with File::create would be.
    let tmp = tempfile::Builder::new()
        .prefix(".memrel-chart")
        .suffix(".png")
        .permissions(std::fs::Permissions::from_mode(0o666))
        .tempfile_in(dir)
        .with_context(|| format!("cannot create a temporary file in {}", dir.display()))?;
    let mut bytes = Vec::new();
    encode_png(&mut bytes, width, height, &rgb)
        .and_then(|()| Ok(tmp.as_file().write_all(&bytes)?))
        .with_context(|| format!("cannot write {}", path.display()))?;
    tmp.persist(path)
        .with_context(|| format!("cannot move {} into place", path.display()))?;
    Ok(())
}

/// The 8-bit RGB pixels (row by row, top first) of a `width`×`height`
/// drawing on white made by `draw`: what [`write_png`] encodes.
pub fn draw_rgb(
    width: u32,
    height: u32,
    draw: impl FnOnce(&Area) -> Result<()>,
) -> Result<Vec<u8>> {
    register_font();
    let mut rgb = vec![255u8; width as usize * height as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, (width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        draw(&root)?;
        root.present().map_err(plot_err)?;
    }
    Ok(rgb)
}

/// Encodes 8-bit RGB pixels losslessly as a PNG into `out`, as small as the
/// png crate makes it without a slow search (issue 36: the committed charts
/// were most of a clone): the best deflate level, a filter chosen per row,
/// and, for a drawing of at most 256 colours, an indexed image (a palette in
/// order of first appearance, 1, 2, 4 or 8 bits a pixel). A decoder gives
/// back exactly `rgb` either way. Charts with anti-aliased text have
/// thousands of colours and stay RGB.
pub fn encode_png(out: impl Write, width: u32, height: u32, rgb: &[u8]) -> Result<()> {
    let mut encoder = png::Encoder::new(out, width, height);
    encoder.set_compression(png::Compression::Best);
    let indexed = palette_of(rgb);
    let data = match &indexed {
        Some((palette, indices)) => {
            let depth = index_depth(palette.len() / 3);
            encoder.set_color(png::ColorType::Indexed);
            encoder.set_depth(depth);
            encoder.set_palette(palette.as_slice());
            // Indexed rows compress best unfiltered (the PNG specification's advice).
            encoder.set_filter(png::FilterType::NoFilter);
            encoder.set_adaptive_filter(png::AdaptiveFilterType::NonAdaptive);
            pack_indices(indices, width as usize, depth)
        }
        None => {
            encoder.set_color(png::ColorType::Rgb);
            encoder.set_depth(png::BitDepth::Eight);
            encoder.set_filter(png::FilterType::Sub);
            encoder.set_adaptive_filter(png::AdaptiveFilterType::Adaptive);
            Vec::new()
        }
    };
    let mut writer = encoder.write_header()?;
    writer.write_image_data(if indexed.is_some() { &data } else { rgb })?;
    writer.finish()?;
    Ok(())
}

/// The palette (RGB triples, in order of first appearance) and each pixel's
/// index into it, if `rgb` has at most 256 colours; `None` if it has more.
fn palette_of(rgb: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    let mut index: HashMap<[u8; 3], u8> = HashMap::new();
    let mut palette = Vec::new();
    let mut indices = Vec::with_capacity(rgb.len() / 3);
    for px in rgb.chunks_exact(3) {
        let colour = [px[0], px[1], px[2]];
        let i = match index.get(&colour) {
            Some(&i) => i,
            None => {
                let i = u8::try_from(index.len()).ok()?;
                index.insert(colour, i);
                palette.extend_from_slice(&colour);
                i
            }
        };
        indices.push(i);
    }
    Some((palette, indices))
}

/// The fewest bits a pixel that hold an index into `colours` colours.
fn index_depth(colours: usize) -> png::BitDepth {
    match colours {
        0..=2 => png::BitDepth::One,
        3..=4 => png::BitDepth::Two,
        5..=16 => png::BitDepth::Four,
        _ => png::BitDepth::Eight,
    }
}

/// Palette indices packed into PNG rows of `depth` bits a pixel (each row
/// starts on a byte, the first pixel in the high bits).
fn pack_indices(indices: &[u8], width: usize, depth: png::BitDepth) -> Vec<u8> {
    let bits = depth as usize;
    if bits == 8 || width == 0 {
        return indices.to_vec();
    }
    let per_byte = 8 / bits;
    let row_bytes = width.div_ceil(per_byte);
    let mut packed = Vec::with_capacity(row_bytes * (indices.len() / width));
    for row in indices.chunks(width) {
        for group in row.chunks(per_byte) {
            let mut byte = 0u8;
            for (k, &i) in group.iter().enumerate() {
                byte |= i << (8 - bits * (k + 1));
            }
            packed.push(byte);
        }
    }
    packed
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

    /// The pixels of the PNG at `path`, decoded by the png crate and expanded to RGB.
    fn decoded(path: &Path) -> (png::ColorType, Vec<u8>) {
        let mut decoder = png::Decoder::new(std::fs::File::open(path).unwrap());
        decoder.set_transformations(png::Transformations::EXPAND);
        let mut reader = decoder.read_info().unwrap();
        let color = reader.info().color_type;
        let mut buf = vec![0; reader.output_buffer_size()];
        let frame = reader.next_frame(&mut buf).unwrap();
        assert_eq!(frame.color_type, png::ColorType::Rgb);
        buf.truncate(frame.buffer_size());
        (color, buf)
    }

    /// A chart-like drawing: filled and stroked shapes, and with `text`
    /// anti-aliased text (thousands of colours).
    fn drawing(text: bool) -> impl Fn(&Area) -> Result<()> {
        move |root: &Area| {
            root.draw(&Rectangle::new([(3, 4), (40, 30)], RED.filled()))
                .map_err(plot_err)?;
            root.draw(&PathElement::new(
                vec![(0, 50), (97, 10)],
                BLUE.stroke_width(1),
            ))
            .map_err(plot_err)?;
            if text {
                register_font();
                let font = (FONT, 15).into_font().color(&BLACK);
                root.draw_text("released 97.3 %", &font, (5, 60))
                    .map_err(plot_err)?;
                root.draw(&Rectangle::new(
                    [(50, 5), (90, 45)],
                    GREEN.mix(0.3).filled(),
                ))
                .map_err(plot_err)?;
            }
            Ok(())
        }
    }

    #[test]
    fn a_png_decodes_to_exactly_the_pixels_drawn_indexed_or_rgb() {
        let dir = tempfile::tempdir().unwrap();
        // 97 px wide: packed index rows that end inside a byte.
        for (text, expected) in [
            (false, png::ColorType::Indexed),
            (true, png::ColorType::Rgb),
        ] {
            let path = dir.path().join(format!("x{text}.png"));
            let rgb = draw_rgb(97, 80, drawing(text)).unwrap();
            write_png(&path, 97, 80, drawing(text)).unwrap();
            let (color, pixels) = decoded(&path);
            assert_eq!(color, expected, "text: {text}");
            assert!(
                pixels == rgb,
                "the PNG's pixels differ from those drawn (text: {text})"
            );
        }
    }

    #[test]
    fn indexed_pngs_of_every_depth_decode_to_the_same_pixels() {
        let dir = tempfile::tempdir().unwrap();
        // 1, 2, 4 and 8 bits a pixel: 2, 3, 16 and 200 colours over odd widths.
        for (colours, width) in [(2u32, 13u32), (3, 7), (16, 9), (200, 31)] {
            let rgb: Vec<u8> = (0..width * 5)
                .flat_map(|i| {
                    let c = (i * 7 + i / width) % colours;
                    [c as u8, (c * 3) as u8, 255 - c as u8]
                })
                .collect();
            let path = dir.path().join(format!("{colours}.png"));
            let mut bytes = Vec::new();
            encode_png(&mut bytes, width, 5, &rgb).unwrap();
            std::fs::write(&path, &bytes).unwrap();
            let (color, pixels) = decoded(&path);
            assert_eq!(color, png::ColorType::Indexed);
            assert!(pixels == rgb, "{colours} colours: pixels differ");
        }
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
