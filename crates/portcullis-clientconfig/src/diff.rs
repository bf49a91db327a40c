//! A unified line diff, for `wrap --dry-run` and `unwrap --dry-run`.

/// Lines of context around each change.
const CONTEXT: usize = 3;
/// Above this many line pairs the diff is the whole file out and in.
const MAX_CELLS: usize = 16_000_000;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    Same(usize, usize),
    Del(usize),
    Add(usize),
}

fn ops(a: &[&str], b: &[&str]) -> Vec<Op> {
    let (n, m) = (a.len(), b.len());
    if n.saturating_mul(m) > MAX_CELLS {
        let mut out: Vec<Op> = (0..n).map(Op::Del).collect();
        out.extend((0..m).map(Op::Add));
        return out;
    }
    // lcs[i][j] = LCS length of a[i..] and b[j..].
    let w = m + 1;
    let mut lcs = vec![0u32; (n + 1) * w];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i * w + j] = if a[i] == b[j] {
                lcs[(i + 1) * w + j + 1] + 1
            } else {
                lcs[(i + 1) * w + j].max(lcs[i * w + j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::new();
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            out.push(Op::Same(i, j));
            i += 1;
            j += 1;
        } else if i < n && (j == m || lcs[(i + 1) * w + j] >= lcs[i * w + j + 1]) {
            out.push(Op::Del(i));
            i += 1;
        } else {
            out.push(Op::Add(j));
            j += 1;
        }
    }
    out
}

/// A unified diff of `before` and `after` (empty when they are equal).
pub fn unified(before: &str, after: &str, name: &str) -> String {
    if before == after {
        return String::new();
    }
    let a: Vec<&str> = before.lines().collect();
    let b: Vec<&str> = after.lines().collect();
    let ops = ops(&a, &b);
    let changed: Vec<usize> = ops
        .iter()
        .enumerate()
        .filter(|(_, o)| !matches!(o, Op::Same(..)))
        .map(|(k, _)| k)
        .collect();
    let mut out = format!("--- {name}\n+++ {name} (new)\n");
    if changed.is_empty() {
        // Only line endings or a final newline differ.
        out.push_str("@@ whitespace at line ends or the end of the file differs @@\n");
        return out;
    }
    // Group changes into hunks with CONTEXT lines around them.
    let mut k = 0;
    while k < changed.len() {
        let start = changed[k].saturating_sub(CONTEXT);
        let mut end = changed[k];
        while k < changed.len() && changed[k] <= end + 2 * CONTEXT + 1 {
            end = changed[k];
            k += 1;
        }
        let end = (end + CONTEXT + 1).min(ops.len());
        let hunk = &ops[start..end];
        let a_start = hunk
            .iter()
            .find_map(|o| match o {
                Op::Same(i, _) | Op::Del(i) => Some(*i),
                Op::Add(_) => None,
            })
            .unwrap_or(0);
        let b_start = hunk
            .iter()
            .find_map(|o| match o {
                Op::Same(_, j) | Op::Add(j) => Some(*j),
                Op::Del(_) => None,
            })
            .unwrap_or(0);
        let a_len = hunk.iter().filter(|o| !matches!(o, Op::Add(_))).count();
        let b_len = hunk.iter().filter(|o| !matches!(o, Op::Del(_))).count();
        out.push_str(&format!(
            "@@ -{},{a_len} +{},{b_len} @@\n",
            a_start + 1,
            b_start + 1
        ));
        for o in hunk {
            match o {
                Op::Same(i, _) => out.push_str(&format!(" {}\n", a[*i])),
                Op::Del(i) => out.push_str(&format!("-{}\n", a[*i])),
                Op::Add(j) => out.push_str(&format!("+{}\n", b[*j])),
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shows_changed_lines_with_context() {
        let a = "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n";
        let b = "1\n2\n3\n4\nfive\n6\n7\n8\n9\n10\n";
        let d = unified(a, b, "f");
        assert!(d.contains("@@ -2,7 +2,7 @@"), "{d}");
        assert!(d.contains("-5\n+five\n"), "{d}");
        assert!(!d.contains(" 1\n"), "{d}");
        assert_eq!(unified(a, a, "f"), "");
    }
}
