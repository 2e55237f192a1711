//! The part of Go's `text/template` that Fulcio's claim templates use.
//!
//! Fulcio configures each CI provider's certificate fields as templates over the token's
//! claims (`"{{ .url }}/{{ .project_path }}"`), so that a team can bring its Fulcio config
//! unchanged. Its shipped templates use four forms, and this module reads exactly those:
//! - `{{ .name }}`: a claim or default by name;
//! - `{{ index . "oidc.example.com/claim" }}`, with or without parentheses: a name that is
//!   not a Go identifier;
//! - `{{ if eq ARG ARG }} … {{ else }} … {{ end }}`, where an `ARG` is one of the two forms
//!   above or a quoted string; and `{{ if ARG }}`, true when the value is not empty;
//! - `{{-` and `-}}`, which trim the white space beside them.
//!
//! Anything else is refused when the config is read, naming what was found, rather than
//! rendered differently from Fulcio. As with Fulcio's `missingkey=error`, a template that
//! names a value the token and the defaults lack fails: no certificate is better than one
//! with a field silently empty.

use std::collections::BTreeMap;

/// A parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    nodes: Vec<Node>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    Text(String),
    Value(Arg),
    If { condition: Condition, then: Vec<Node>, otherwise: Vec<Node> },
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Arg {
    Field(String),
    Literal(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Condition {
    Eq(Arg, Arg),
    NotEmpty(Arg),
}

/// Why a template cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("template {template:?}: {why}")]
pub struct ParseError {
    template: String,
    #[source]
    why: Syntax,
}

impl ParseError {
    /// What in the template is not read.
    pub fn syntax(&self) -> &Syntax {
        &self.why
    }
}

/// What a template holds that this reader does not read, as found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Syntax {
    #[error("{{{{ else }}}} outside an {{{{ if }}}}")]
    ElseOutsideIf,
    #[error("{{{{ end }}}} without an {{{{ if }}}}")]
    EndWithoutIf,
    #[error("an action is not closed with }}}}")]
    UnclosedAction,
    #[error("two {{{{ else }}}} in one {{{{ if }}}}")]
    TwoElses,
    #[error("an {{{{ if }}}} has no {{{{ end }}}}")]
    NoEnd,
    #[error("an {{{{ if }}}} has no condition")]
    NoCondition,
    #[error("a quoted string is not closed")]
    UnclosedString,
    /// `eq` with more than two values: the rest.
    #[error("eq takes two values, found also {0:?}")]
    EqArity(Vec<String>),
    /// One value wanted, more found: the rest.
    #[error("expected one value, found also {0:?}")]
    ExtraValues(Vec<String>),
    #[error("a value is missing")]
    MissingValue,
    #[error("index must be written `index . \"name\"`")]
    Index,
    #[error("{0:?} is not a value this template reader knows (.name, index . \"name\", or \"text\")")]
    UnknownValue(String),
    #[error("{0:?} is not a quoted string")]
    NotQuoted(String),
    /// A backslash and what follows it (nothing, at the end of the string).
    #[error("the escape \\{} is not supported", .0.map(String::from).unwrap_or_default())]
    Escape(Option<char>),
}

/// Why a template cannot be rendered for a token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the token has no claim {0:?}, and the issuer's templates give it no default")]
pub struct MissingValue(pub String);

impl Template {
    pub fn parse(text: &str) -> Result<Template, ParseError> {
        let fail = |why: Syntax| ParseError { template: text.to_string(), why };
        let mut parser = Parser { rest: text, pending_trim: false };
        let (nodes, end) = parser.block().map_err(fail)?;
        match end {
            BlockEnd::Eof => Ok(Template { nodes }),
            BlockEnd::Else => Err(fail(Syntax::ElseOutsideIf)),
            BlockEnd::End => Err(fail(Syntax::EndWithoutIf)),
        }
    }

    /// The names this template reads, for checks at start-up.
    pub fn names(&self) -> Vec<&str> {
        let mut out = Vec::new();
        collect_names(&self.nodes, &mut out);
        out
    }

    /// Renders with `values` (the token's claims over the issuer's defaults).
    pub fn render(&self, values: &BTreeMap<String, String>) -> Result<String, MissingValue> {
        let mut out = String::new();
        render_nodes(&self.nodes, values, &mut out)?;
        Ok(out)
    }
}

fn collect_names<'a>(nodes: &'a [Node], out: &mut Vec<&'a str>) {
    let arg = |a: &'a Arg, out: &mut Vec<&'a str>| {
        if let Arg::Field(name) = a {
            out.push(name.as_str());
        }
    };
    for node in nodes {
        match node {
            Node::Text(_) => {}
            Node::Value(a) => arg(a, out),
            Node::If { condition, then, otherwise } => {
                match condition {
                    Condition::Eq(a, b) => {
                        arg(a, out);
                        arg(b, out);
                    }
                    Condition::NotEmpty(a) => arg(a, out),
                }
                collect_names(then, out);
                collect_names(otherwise, out);
            }
        }
    }
}

fn value<'a>(arg: &'a Arg, values: &'a BTreeMap<String, String>) -> Result<&'a str, MissingValue> {
    match arg {
        Arg::Literal(s) => Ok(s),
        Arg::Field(name) => values.get(name).map(String::as_str).ok_or_else(|| MissingValue(name.clone())),
    }
}

fn render_nodes(nodes: &[Node], values: &BTreeMap<String, String>, out: &mut String) -> Result<(), MissingValue> {
    for node in nodes {
        match node {
            Node::Text(t) => out.push_str(t),
            Node::Value(a) => out.push_str(value(a, values)?),
            Node::If { condition, then, otherwise } => {
                let holds = match condition {
                    Condition::Eq(a, b) => value(a, values)? == value(b, values)?,
                    Condition::NotEmpty(a) => !value(a, values)?.is_empty(),
                };
                render_nodes(if holds { then } else { otherwise }, values, out)?;
            }
        }
    }
    Ok(())
}

enum BlockEnd {
    Eof,
    Else,
    End,
}

struct Parser<'a> {
    rest: &'a str,
    /// The last action ended with `-}}`: the text after it loses its leading white space.
    pending_trim: bool,
}

impl<'a> Parser<'a> {
    /// Nodes up to the end of the text, or to an `{{ else }}` or `{{ end }}`.
    fn block(&mut self) -> Result<(Vec<Node>, BlockEnd), Syntax> {
        let mut nodes = Vec::new();
        loop {
            let at = self.rest.find("{{");
            let mut text = at.map_or(self.rest, |at| &self.rest[..at]);
            if self.pending_trim {
                text = text.trim_start();
                self.pending_trim = false;
            }
            let Some(at) = at else {
                push_text(&mut nodes, text);
                self.rest = "";
                return Ok((nodes, BlockEnd::Eof));
            };
            let after_open = &self.rest[at + 2..];
            let (trim_before, inner_start) = match after_open.strip_prefix('-') {
                Some(r) if r.starts_with(char::is_whitespace) => (true, r),
                _ => (false, after_open),
            };
            if trim_before {
                text = text.trim_end();
            }
            push_text(&mut nodes, text);
            let close = inner_start.find("}}").ok_or(Syntax::UnclosedAction)?;
            let mut inner = &inner_start[..close];
            if let Some(r) = inner.strip_suffix('-').filter(|r| r.ends_with(char::is_whitespace)) {
                inner = r;
                self.pending_trim = true;
            }
            self.rest = &inner_start[close + 2..];
            let words = words(inner)?;
            match words.first().map(String::as_str) {
                Some("if") => {
                    let condition = condition(&words[1..])?;
                    let (then, end) = self.block()?;
                    let otherwise = match end {
                        BlockEnd::Else => match self.block()? {
                            (nodes, BlockEnd::End) => nodes,
                            (_, BlockEnd::Else) => return Err(Syntax::TwoElses),
                            (_, BlockEnd::Eof) => return Err(Syntax::NoEnd),
                        },
                        BlockEnd::End => Vec::new(),
                        BlockEnd::Eof => return Err(Syntax::NoEnd),
                    };
                    nodes.push(Node::If { condition, then, otherwise });
                }
                Some("else") if words.len() == 1 => return Ok((nodes, BlockEnd::Else)),
                Some("end") if words.len() == 1 => return Ok((nodes, BlockEnd::End)),
                _ => nodes.push(Node::Value(arg(&words)?)),
            }
        }
    }
}

fn push_text(nodes: &mut Vec<Node>, text: &str) {
    if !text.is_empty() {
        nodes.push(Node::Text(text.to_string()));
    }
}

/// An action's words: parentheses dropped (the templates use them only around `index`),
/// quoted strings kept whole with their quotes.
fn words(inner: &str) -> Result<Vec<String>, Syntax> {
    let mut out = Vec::new();
    let mut chars = inner.char_indices().peekable();
    while let Some(&(start, c)) = chars.peek() {
        if c.is_whitespace() || c == '(' || c == ')' {
            chars.next();
            continue;
        }
        if c == '"' {
            chars.next();
            let mut closed = None;
            let mut escaped = false;
            for (i, c) in chars.by_ref() {
                match (escaped, c) {
                    (false, '\\') => escaped = true,
                    (false, '"') => {
                        closed = Some(i);
                        break;
                    }
                    _ => escaped = false,
                }
            }
            let end = closed.ok_or(Syntax::UnclosedString)?;
            out.push(inner[start..=end].to_string());
            continue;
        }
        let mut end = inner.len();
        while let Some(&(i, c)) = chars.peek() {
            if c.is_whitespace() || c == '(' || c == ')' || c == '"' {
                end = i;
                break;
            }
            chars.next();
        }
        out.push(inner[start..end].to_string());
    }
    Ok(out)
}

fn condition(words: &[String]) -> Result<Condition, Syntax> {
    match words.first().map(String::as_str) {
        Some("eq") => {
            let (a, rest) = one_arg(&words[1..])?;
            let (b, rest) = one_arg(rest)?;
            if !rest.is_empty() {
                return Err(Syntax::EqArity(rest.to_vec()));
            }
            Ok(Condition::Eq(a, b))
        }
        Some(_) => Ok(Condition::NotEmpty(arg(words)?)),
        None => Err(Syntax::NoCondition),
    }
}

/// Exactly one value: `.name`, `index . "key"` or `"literal"`.
fn arg(words: &[String]) -> Result<Arg, Syntax> {
    match one_arg(words)? {
        (a, []) => Ok(a),
        (_, rest) => Err(Syntax::ExtraValues(rest.to_vec())),
    }
}

fn one_arg(words: &[String]) -> Result<(Arg, &[String]), Syntax> {
    let first = words.first().ok_or(Syntax::MissingValue)?;
    if first == "index" {
        return match words.get(1..3) {
            Some([dot, key]) if dot == "." => Ok((Arg::Field(literal(key)?), &words[3..])),
            _ => Err(Syntax::Index),
        };
    }
    if first.starts_with('"') {
        return Ok((Arg::Literal(literal(first)?), &words[1..]));
    }
    match first.strip_prefix('.') {
        Some(name) if !name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || c == '_') => {
            Ok((Arg::Field(name.to_string()), &words[1..]))
        }
        _ => Err(Syntax::UnknownValue(first.clone())),
    }
}

fn literal(word: &str) -> Result<String, Syntax> {
    let body = word.strip_prefix('"').and_then(|w| w.strip_suffix('"')).ok_or_else(|| Syntax::NotQuoted(word.to_string()))?;
    let mut out = String::with_capacity(body.len());
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some(c @ ('\\' | '"')) => out.push(c),
                other => return Err(Syntax::Escape(other)),
            }
        } else {
            out.push(c);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn render(t: &str, pairs: &[(&str, &str)]) -> String {
        Template::parse(t).unwrap().render(&values(pairs)).unwrap()
    }

    #[test]
    fn the_forms_fulcios_shipped_templates_use() {
        assert_eq!(render("{{ .url }}/{{ .job_workflow_ref }}", &[("url", "https://github.com"), ("job_workflow_ref", "o/r@x")]), "https://github.com/o/r@x");
        assert_eq!(render("https://{{ .ci_config_ref_uri }}", &[("ci_config_ref_uri", "gitlab.com/g/p//.gitlab-ci.yml@refs/heads/main")]), "https://gitlab.com/g/p//.gitlab-ci.yml@refs/heads/main");
        let gitlab_ref = r#"refs/{{if eq .ref_type "branch"}}heads/{{ else }}tags/{{end}}{{ .ref }}"#;
        assert_eq!(render(gitlab_ref, &[("ref_type", "branch"), ("ref", "main")]), "refs/heads/main");
        assert_eq!(render(gitlab_ref, &[("ref_type", "tag"), ("ref", "v1")]), "refs/tags/v1");
        let circle = r#"{{.api_url}}/pipeline/{{(index . "oidc.circleci.com/pipeline-id")}}/config"#;
        assert_eq!(render(circle, &[("api_url", "https://circleci.com/api/v2"), ("oidc.circleci.com/pipeline-id", "p1")]), "https://circleci.com/api/v2/pipeline/p1/config");
        let ssh = r#"{{if eq (index . "oidc.circleci.com/ssh-rerun") "true"}}ssh-rerun{{ else }}""{{end}}"#;
        assert_eq!(render(ssh, &[("oidc.circleci.com/ssh-rerun", "true")]), "ssh-rerun");
        assert_eq!(render(ssh, &[("oidc.circleci.com/ssh-rerun", "false")]), "\"\"", "Go prints the quotes outside an action as text");
        assert_eq!(render("{{ if .env }}[{{ .env }}]{{ end }}", &[("env", "")]), "");
        assert_eq!(render("a  {{- .x -}}  b", &[("x", "X")]), "aXb");
        assert_eq!(render("plain", &[]), "plain");
    }

    #[test]
    fn a_missing_value_is_named() {
        let t = Template::parse("{{ .url }}/{{ .project_path }}").unwrap();
        assert_eq!(t.render(&values(&[("url", "u")])), Err(MissingValue("project_path".into())));
        assert_eq!(t.names(), ["url", "project_path"]);
    }

    #[test]
    fn what_it_does_not_read_is_refused_when_parsed() {
        for (bad, why) in [
            ("{{ .a ", "not closed"),
            ("{{ printf \"%s\" .a }}", "not a value"),
            ("{{ .a | upper }}", "found also"),
            ("{{ if .a }}x", "no {{ end }}"),
            ("x{{ end }}", "without an {{ if }}"),
            ("{{ else }}", "outside"),
            ("{{ index .a \"b\" }}", "index must be"),
            ("{{ if eq .a }}x{{ end }}", "missing"),
            ("{{ \"unterminated }}", "not closed"),
            ("{{ .a.b }}", "not a value"),
        ] {
            let err = Template::parse(bad).unwrap_err().to_string();
            assert!(err.contains(why), "{bad:?}: {err}");
        }
    }
}
