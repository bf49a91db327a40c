//! Variables in server entries, as the clients expand them before starting a
//! server: `${VAR}` and `${VAR:-default}` (Claude Code), `${env:VAR}`,
//! `${workspaceFolder}` and `${userHome}` (VS Code, Cursor). `${input:…}` and other
//! forms are left as written and reported: only the client can answer them.

use std::path::Path;

/// What an expansion left unresolved.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Expanded {
    pub text: String,
    /// Variables that could not be resolved (`input:token`, an unset `VAR`).
    pub unresolved: Vec<String>,
}

/// Expand the variables of one string. `env` looks a variable up; `project` is
/// the workspace folder.
pub fn expand(
    s: &str,
    env: &dyn Fn(&str) -> Option<String>,
    project: &Path,
    home: &Path,
) -> Expanded {
    let mut out = Expanded::default();
    let mut rest = s;
    while let Some(i) = rest.find("${") {
        out.text.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        let Some(end) = after.find('}') else {
            out.text.push_str(&rest[i..]);
            rest = "";
            break;
        };
        let name = &after[..end];
        let (var, default) = match name.split_once(":-") {
            Some((v, d)) => (v, Some(d)),
            None => (name, None),
        };
        let value = match var {
            "workspaceFolder" | "workspaceRoot" => Some(project.display().to_string()),
            "userHome" => Some(home.display().to_string()),
            v => match v.strip_prefix("env:") {
                Some(e) => env(e),
                None if v.contains(':') => None,
                None => env(v),
            },
        };
        match value.or_else(|| default.map(str::to_string)) {
            Some(v) => out.text.push_str(&v),
            None => {
                out.unresolved.push(name.to_string());
                out.text.push_str(&rest[i..i + 2 + end + 1]);
            }
        }
        rest = &after[end + 1..];
    }
    out.text.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_the_clients_forms_and_reports_the_rest() {
        let env = |k: &str| (k == "TOKEN").then(|| "t0k".to_string());
        let p = Path::new("/w/p");
        let h = Path::new("/home/u");
        let e = expand(
            "a ${TOKEN} ${env:TOKEN} ${workspaceFolder}/x ${userHome} ${NOPE:-d}",
            &env,
            p,
            h,
        );
        assert_eq!(e.text, "a t0k t0k /w/p/x /home/u d");
        assert!(e.unresolved.is_empty());
        let e = expand("${input:key} and ${UNSET} and ${open", &env, p, h);
        assert_eq!(e.text, "${input:key} and ${UNSET} and ${open");
        assert_eq!(e.unresolved, vec!["input:key".to_string(), "UNSET".into()]);
        assert_eq!(expand("ünï ${TOKEN}", &env, p, h).text, "ünï t0k");
    }
}
