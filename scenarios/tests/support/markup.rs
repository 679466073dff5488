//! A strict little parser for the markup fencesim writes (the HTML page, whose markup is
//! well-formed XML apart from its doctype, and the JUnit XML): elements must nest and
//! close, attributes must be quoted and unique, entities must be known, and the raw text of
//! `<script>` and `<style>` must not close early. It builds a tree the tests query.

use std::collections::BTreeMap;

#[derive(Debug, Default)]
pub struct Element {
    pub name: String,
    pub attrs: BTreeMap<String, String>,
    pub children: Vec<Element>,
    pub text: String,
}

impl Element {
    /// Every element below (and including) this one, depth first.
    pub fn walk<'a>(&'a self, out: &mut Vec<&'a Element>) {
        out.push(self);
        for c in &self.children {
            c.walk(out);
        }
    }
    pub fn all(&self) -> Vec<&Element> {
        let mut v = Vec::new();
        self.walk(&mut v);
        v
    }
    pub fn attr(&self, k: &str) -> Option<&str> {
        self.attrs.get(k).map(String::as_str)
    }
    pub fn classes(&self) -> Vec<&str> {
        self.attr("class").map(|c| c.split_whitespace().collect()).unwrap_or_default()
    }
    pub fn has_class(&self, c: &str) -> bool {
        self.classes().contains(&c)
    }
}

fn unescape(s: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        let tail = &rest[i + 1..];
        let end = tail.find(';').ok_or_else(|| format!("unterminated entity near {:?}", &rest[i..]))?;
        let name = &tail[..end];
        let ch = match name {
            "amp" => '&',
            "lt" => '<',
            "gt" => '>',
            "quot" => '"',
            "apos" | "#39" => '\'',
            n if n.starts_with('#') => {
                let code = n[1..].parse::<u32>().map_err(|_| format!("bad entity &{n};"))?;
                char::from_u32(code).ok_or_else(|| format!("bad entity &{n};"))?
            }
            n => return Err(format!("unknown entity &{n};")),
        };
        out.push(ch);
        rest = &tail[end + 1..];
    }
    if rest.contains('<') {
        return Err(format!("raw '<' in text {rest:?}"));
    }
    out.push_str(rest);
    Ok(out)
}

/// Parse a document into its root element.
pub fn parse(doc: &str) -> Result<Element, String> {
    let mut s = doc.trim_start();
    for prefix in ["<?xml", "<!DOCTYPE"] {
        if s.starts_with(prefix) {
            let end = s.find('>').ok_or("unterminated prolog")?;
            s = s[end + 1..].trim_start();
        }
    }
    let mut stack: Vec<Element> = vec![Element { name: "#document".into(), ..Element::default() }];
    while !s.is_empty() {
        if let Some(rest) = s.strip_prefix("<!--") {
            let end = rest.find("-->").ok_or("unterminated comment")?;
            s = &rest[end + 3..];
        } else if let Some(rest) = s.strip_prefix("</") {
            let end = rest.find('>').ok_or("unterminated end tag")?;
            let name = rest[..end].trim();
            let el = stack.pop().ok_or("end tag without start")?;
            if el.name != name {
                return Err(format!("</{name}> closes <{}>", el.name));
            }
            stack.last_mut().ok_or(format!("</{name}> closes the document"))?.children.push(el);
            s = &rest[end + 1..];
        } else if let Some(rest) = s.strip_prefix('<') {
            let (el, closed, after) = start_tag(rest)?;
            s = after;
            if closed {
                stack.last_mut().ok_or("no parent")?.children.push(el);
            } else if el.name == "script" || el.name == "style" {
                let close = format!("</{}>", el.name);
                let end = s.find(&close).ok_or(format!("unterminated <{}>", el.name))?;
                let mut el = el;
                el.text = s[..end].to_string();
                s = &s[end + close.len()..];
                stack.last_mut().ok_or("no parent")?.children.push(el);
            } else {
                stack.push(el);
            }
        } else {
            let end = s.find('<').unwrap_or(s.len());
            let text = unescape(&s[..end])?;
            stack.last_mut().ok_or("no parent")?.text.push_str(&text);
            s = &s[end..];
        }
    }
    if stack.len() != 1 {
        return Err(format!("unclosed <{}>", stack.last().map_or("", |e| e.name.as_str())));
    }
    let mut doc = stack.pop().ok_or("empty")?;
    if doc.children.len() != 1 {
        return Err(format!("{} root elements", doc.children.len()));
    }
    doc.children.pop().ok_or_else(|| "no root".into())
}

/// `name a="1" b="2" />...` after the `<`: the element, whether it closed itself, the rest.
fn start_tag(s: &str) -> Result<(Element, bool, &str), String> {
    let name_end = s.find(|c: char| c.is_whitespace() || c == '>' || c == '/').ok_or("unterminated tag")?;
    let name = &s[..name_end];
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == ':') {
        return Err(format!("bad tag name {name:?}"));
    }
    let mut el = Element { name: name.to_string(), ..Element::default() };
    let mut rest = &s[name_end..];
    loop {
        rest = rest.trim_start();
        if let Some(r) = rest.strip_prefix("/>") {
            return Ok((el, true, r));
        }
        if let Some(r) = rest.strip_prefix('>') {
            return Ok((el, false, r));
        }
        let eq = rest.find('=').ok_or(format!("attribute without value in <{name}>"))?;
        let key = rest[..eq].trim();
        if key.is_empty() || key.contains(char::is_whitespace) {
            return Err(format!("bad attribute {key:?} in <{name}>"));
        }
        let r = rest[eq + 1..].strip_prefix('"').ok_or(format!("unquoted attribute {key} in <{name}>"))?;
        let close = r.find('"').ok_or("unterminated attribute")?;
        let value = unescape(&r[..close])?;
        if el.attrs.insert(key.to_string(), value).is_some() {
            return Err(format!("duplicate attribute {key} in <{name}>"));
        }
        rest = &r[close + 1..];
    }
}

#[test]
fn the_parser_rejects_what_a_browser_or_ci_tool_would_trip_on() {
    assert!(parse("<a><b></a></b>").is_err());
    assert!(parse("<a x=1></a>").is_err());
    assert!(parse("<a x=\"1\" x=\"2\"></a>").is_err());
    assert!(parse("<a>&nbsp;</a>").is_err());
    assert!(parse("<a><b></a>").is_err());
    assert!(parse("<a></a><b></b>").is_err());
    let ok = parse("<!DOCTYPE html>\n<a k=\"&lt;1&gt;\"><script>if (1 < 2) {}</script><b /></a>").unwrap();
    assert_eq!(ok.attr("k"), Some("<1>"));
    assert_eq!(ok.all().len(), 3);
}
