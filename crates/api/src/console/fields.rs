//! What every console form shares: the fields as sent (kept to show them
//! again), the problems found in them (beside the field each names, and
//! all together above the form), and the markup of a labelled field.

use std::collections::BTreeMap;

use maud::{Markup, html};

use gtm_model::error::ApiError;

/// A form's fields as sent.
#[derive(Debug, Default, Clone)]
pub struct Fields(pub BTreeMap<String, String>);

impl Fields {
    /// The form's fields from a urlencoded body, without the CSRF token.
    pub fn parse(body: &[u8]) -> Self {
        let mut f = Self::default();
        for (k, v) in form_urlencoded::parse(body) {
            if k != crate::auth::CSRF_FIELD {
                f.set(&k, v.into_owned());
            }
        }
        f
    }
    pub fn get(&self, key: &str) -> &str {
        self.0.get(key).map(|s| s.trim()).unwrap_or("")
    }
    pub fn set(&mut self, key: &str, value: impl Into<String>) {
        self.0.insert(key.to_string(), value.into());
    }
}

/// Problems to show: by field key, and all of them in order.
#[derive(Debug, Default)]
pub struct Problems {
    pub by_field: BTreeMap<String, Vec<String>>,
    pub all: Vec<String>,
}

impl Problems {
    pub fn add(&mut self, field: Option<String>, text: String) {
        if let Some(f) = field {
            self.by_field.entry(f).or_default().push(text.clone());
        }
        self.all.push(text);
    }
    pub fn is_empty(&self) -> bool {
        self.all.is_empty()
    }
    pub fn has(&self, key: &str) -> bool {
        self.by_field.contains_key(key)
    }
    /// An API error's lines, each beside the field `field_of` finds in it.
    pub fn add_api_error(&mut self, e: ApiError, field_of: impl Fn(&str) -> Option<String>) {
        for text in e.errors {
            let field = field_of(&text);
            self.add(field, text);
        }
        if self.all.is_empty() {
            self.add(None, e.message);
        }
    }
}

/// The box above a form that says nothing was applied, and why.
pub fn summary(p: &Problems) -> Markup {
    html! {
        @if !p.is_empty() {
            div.error role="alert" #form-errors {
                p { "Nothing was applied: " (p.all.len()) " problem" @if p.all.len() != 1 { "s" } "." }
                ul { @for e in &p.all { li { (e) } } }
            }
        }
    }
}

/// The problems of one field, below it.
pub fn errors_of(p: &Problems, key: &str) -> Markup {
    html! {
        @if let Some(list) = p.by_field.get(key) {
            @for e in list { p.field-error id={ "err-" (key) } { (e) } }
        }
    }
}

pub fn text_field(f: &Fields, p: &Problems, key: &str, label: &str, hint: &str) -> Markup {
    html! {
        div.field .invalid[p.has(key)] {
            label for={ "f-" (key) } { (label) }
            input id={ "f-" (key) } name=(key) type="text" value=(f.get(key)) placeholder=(hint)
                aria-invalid=[p.has(key).then_some("true")]
                aria-describedby=[p.has(key).then(|| format!("err-{key}"))];
            (errors_of(p, key))
        }
    }
}

pub fn select_field(
    f: &Fields,
    p: &Problems,
    key: &str,
    label: &str,
    options: &[(String, String)],
) -> Markup {
    html! {
        div.field .invalid[p.has(key)] {
            label for={ "f-" (key) } { (label) }
            select id={ "f-" (key) } name=(key)
                aria-invalid=[p.has(key).then_some("true")]
                aria-describedby=[p.has(key).then(|| format!("err-{key}"))] {
                @for (value, text) in options {
                    option value=(value) selected[f.get(key) == value] { (text) }
                }
            }
            (errors_of(p, key))
        }
    }
}

/// Choices with a first "(default: ...)" one that leaves the key out.
pub fn with_default(values: &[&str], default: &str) -> Vec<(String, String)> {
    std::iter::once((String::new(), format!("(default: {default})")))
        .chain(values.iter().map(|v| (v.to_string(), v.to_string())))
        .collect()
}

/// Yes, no, or the default.
pub fn flag_options(default: &str) -> Vec<(String, String)> {
    vec![
        (String::new(), format!("(default: {default})")),
        ("true".to_string(), "yes".to_string()),
        ("false".to_string(), "no".to_string()),
    ]
}

/// A comma- or line-separated list.
pub fn split_list(text: &str) -> Vec<String> {
    text.split([',', '\n'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// A flag as the form shows it: `true`, `false`, or empty for the default.
pub fn flag_text(v: Option<bool>) -> String {
    v.map_or(String::new(), |b| b.to_string())
}

/// A list as the form shows it.
pub fn list_text(items: &[String]) -> String {
    items.join(", ")
}
