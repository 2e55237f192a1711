//! Markdown tables with padded columns: readable in a terminal, and pasteable as they are into
//! `docs/performance.md` beside the reference reports' tables.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

pub struct Table {
    columns: Vec<(String, Align)>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(columns: &[(&str, Align)]) -> Table {
        Table { columns: columns.iter().map(|(h, a)| (h.to_string(), *a)).collect(), rows: Vec::new() }
    }

    /// Adds a row; missing cells are left empty and extra cells are ignored.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub fn render(&self) -> String {
        let n = self.columns.len();
        let cell = |row: &Vec<String>, i: usize| row.get(i).cloned().unwrap_or_default();
        let widths: Vec<usize> = (0..n)
            .map(|i| {
                let body = self.rows.iter().map(|r| cell(r, i).chars().count()).max().unwrap_or(0);
                body.max(self.columns[i].0.chars().count()).max(3)
            })
            .collect();
        let line = |cells: Vec<String>| {
            let padded: Vec<String> = cells
                .iter()
                .enumerate()
                .map(|(i, c)| match self.columns[i].1 {
                    Align::Left => format!("{c:<w$}", w = widths[i]),
                    Align::Right => format!("{c:>w$}", w = widths[i]),
                })
                .collect();
            format!("| {} |\n", padded.join(" | "))
        };
        let mut out = line(self.columns.iter().map(|(h, _)| h.clone()).collect());
        // The rule spans each cell's padding too; a colon on the right marks a right-aligned column.
        let rule: Vec<String> = (0..n)
            .map(|i| match self.columns[i].1 {
                Align::Left => "-".repeat(widths[i] + 2),
                Align::Right => format!("{}:", "-".repeat(widths[i] + 1)),
            })
            .collect();
        out.push_str(&format!("|{}|\n", rule.join("|")));
        for r in &self.rows {
            out.push_str(&line((0..n).map(|i| cell(r, i)).collect()));
        }
        out
    }
}

/// A number with thousands separators and `decimals` places, as the reports print them (`6,024`, `999.1`).
pub fn num(v: f64, decimals: usize) -> String {
    if !v.is_finite() {
        return v.to_string();
    }
    let s = format!("{:.*}", decimals, v.abs());
    let (int, frac) = s.split_once('.').map_or((s.as_str(), None), |(i, f)| (i, Some(f)));
    let mut grouped = String::new();
    for (i, ch) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(ch);
    }
    let sign = if v < 0.0 && s.chars().any(|c| c.is_ascii_digit() && c != '0') { "-" } else { "" };
    match frac {
        Some(f) => format!("{sign}{grouped}.{f}"),
        None => format!("{sign}{grouped}"),
    }
}

/// A latency in milliseconds: two decimals below 100 ms, one above.
pub fn ms(v: f64) -> String {
    if v < 100.0 {
        num(v, 2)
    } else {
        num(v, 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_grouped() {
        assert_eq!(num(6024.0, 0), "6,024");
        assert_eq!(num(1_627_483.0, 0), "1,627,483");
        assert_eq!(num(999.14, 1), "999.1");
        assert_eq!(num(-12345.678, 2), "-12,345.68");
        assert_eq!(num(-0.001, 1), "0.0");
    }

    #[test]
    fn columns_are_padded_and_aligned() {
        let mut t = Table::new(&[("metric", Align::Left), ("value", Align::Right)]);
        t.row(vec!["p99 ms".into(), "24.30".into()]);
        t.row(vec!["achieved rps".into(), "999.1".into()]);
        let text = t.render();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "| metric       | value |");
        assert_eq!(lines[1], "|--------------|------:|");
        assert_eq!(lines[2], "| p99 ms       | 24.30 |");
        assert_eq!(lines[3], "| achieved rps | 999.1 |");
    }
}
