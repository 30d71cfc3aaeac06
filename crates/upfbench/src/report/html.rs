//! The HTML page: one file, no script, no external resource; charts inlined as data: URIs
//! so the page can be mailed or attached on its own.

use super::charts::Chart;
use super::table::{sections, Align, Table};
use super::Report;

const STYLE: &str =
    "body{font-family:DejaVu Sans,Verdana,sans-serif;margin:2em;color:#222;max-width:1250px}\
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ccc}\
table{border-collapse:collapse;margin:.5em 0}\
th,td{border:1px solid #ccc;padding:.2em .6em}th{background:#f0f0f0}\
td.r{text-align:right;font-variant-numeric:tabular-nums}\
img{max-width:100%;height:auto;border:1px solid #eee;margin:.5em 0}p.lines{font-family:monospace}";

/// The page: title, each section's sentences, table and chart (charts are looked up by file
/// stem among `charts`), and a link to report.json.
pub fn render_html(r: &Report, charts: &[Chart]) -> String {
    let mut o = String::new();
    o.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    o.push_str(&format!("<title>{}</title>\n", esc(&r.title)));
    o.push_str(&format!("<style>{STYLE}</style>\n</head>\n<body>\n"));
    o.push_str(&format!("<h1>{}</h1>\n", esc(&r.title)));
    o.push_str(
        "<p>Every figure as measured in this run; the data: \
         <a href=\"report.json\">report.json</a>.</p>\n",
    );
    for s in sections(r) {
        o.push_str(&format!(
            "<section id=\"{}\">\n<h2>{}</h2>\n",
            s.id,
            esc(&s.heading)
        ));
        if !s.lines.is_empty() {
            o.push_str("<p class=\"lines\">");
            let lines: Vec<String> = s.lines.iter().map(|l| esc(l)).collect();
            o.push_str(&lines.join("<br>\n"));
            o.push_str("</p>\n");
        }
        for t in &s.tables {
            o.push_str(&table_html(t));
        }
        if let Some(c) = s.chart.and_then(|n| charts.iter().find(|c| c.name == n)) {
            // Where the plots and the legend are in the image's pixels, for whoever checks
            // the page (e.g. that no legend covers a plot).
            let plots: Vec<String> = c.plots.iter().map(|p| p.to_attr()).collect();
            let legend = c
                .legend
                .map(|l| format!(" data-legend=\"{}\"", l.to_attr()))
                .unwrap_or_default();
            o.push_str(&format!(
                "<p><img src=\"data:image/png;base64,{}\" width=\"{}\" height=\"{}\" alt=\"{}\" \
                 title=\"{}\" data-plots=\"{}\"{legend}></p>\n",
                base64(&c.png),
                c.width,
                c.height,
                esc(&c.title),
                esc(&c.file_name()),
                plots.join(" ")
            ));
        }
        o.push_str("</section>\n");
    }
    o.push_str("</body>\n</html>\n");
    o
}

pub(crate) fn table_html(t: &Table) -> String {
    let mut o = String::from("<table>\n<tr>");
    for h in &t.headers {
        o.push_str(&format!("<th>{}</th>", esc(h)));
    }
    o.push_str("</tr>\n");
    for row in &t.rows {
        o.push_str("<tr>");
        for (c, a) in row.iter().zip(&t.align) {
            match a {
                Align::Right => o.push_str(&format!("<td class=\"r\">{}</td>", esc(c))),
                Align::Left => o.push_str(&format!("<td>{}</td>", esc(c))),
            }
        }
        o.push_str("</tr>\n");
    }
    o.push_str("</table>\n");
    o
}

fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// Standard base64 (RFC 4648, with padding).
fn base64(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut o = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        o.push(A[(n >> 18) as usize & 63] as char);
        o.push(A[(n >> 12) as usize & 63] as char);
        o.push(if chunk.len() > 1 {
            A[(n >> 6) as usize & 63] as char
        } else {
            '='
        });
        o.push(if chunk.len() > 2 {
            A[n as usize & 63] as char
        } else {
            '='
        });
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_rfc4648_vectors() {
        for (i, o) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(i.as_bytes()), o);
        }
    }

    #[test]
    fn escapes_markup() {
        assert_eq!(esc("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
    }
}
