//! The terminal rendering: results first, the machine and the UPF under test last.

use super::table::sections;
use super::Report;

/// The report as plain text: title, then per section a heading, its sentences and its
/// tables with aligned columns.
pub fn render_text(r: &Report) -> String {
    let mut secs = sections(r);
    // Results first; what they were measured on after them.
    secs.sort_by_key(|s| matches!(s.id, "machine" | "upf"));
    let mut out = String::new();
    out.push_str(&r.title);
    out.push('\n');
    out.push_str(&"=".repeat(r.title.chars().count()));
    out.push('\n');
    for s in secs {
        out.push('\n');
        out.push_str(&s.heading);
        out.push('\n');
        out.push_str(&"-".repeat(s.heading.chars().count()));
        out.push('\n');
        for l in &s.lines {
            out.push_str(l);
            out.push('\n');
        }
        for t in &s.tables {
            if !s.lines.is_empty() {
                out.push('\n');
            }
            out.push_str(&t.to_text());
        }
    }
    out
}
