//! Field errors in Kubernetes' own shape and wording (`k8s.io/apimachinery/pkg/util/validation/field`),
//! so that kubectl users read our denials exactly like the API server's own.

use std::fmt;

use serde_json::Value;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ErrorType {
    Required,
    Duplicate,
    Invalid,
    NotSupported,
    Forbidden,
    TooLong,
    TooMany,
    TypeInvalid,
}

impl ErrorType {
    fn label(self) -> &'static str {
        match self {
            ErrorType::Required => "Required value",
            ErrorType::Duplicate => "Duplicate value",
            ErrorType::Invalid | ErrorType::TypeInvalid => "Invalid value",
            ErrorType::NotSupported => "Unsupported value",
            ErrorType::Forbidden => "Forbidden",
            ErrorType::TooLong => "Too long",
            ErrorType::TooMany => "Too many",
        }
    }

    /// The `StatusCause.reason` Kubernetes uses for this type.
    pub fn cause_reason(self) -> &'static str {
        match self {
            ErrorType::Required => "FieldValueRequired",
            ErrorType::Duplicate => "FieldValueDuplicate",
            ErrorType::Invalid => "FieldValueInvalid",
            ErrorType::NotSupported => "FieldValueNotSupported",
            ErrorType::Forbidden => "FieldValueForbidden",
            ErrorType::TooLong => "FieldValueTooLong",
            ErrorType::TooMany => "FieldValueTooMany",
            ErrorType::TypeInvalid => "FieldValueTypeInvalid",
        }
    }

    fn shows_value(self) -> bool {
        !matches!(
            self,
            ErrorType::Required | ErrorType::Forbidden | ErrorType::TooLong | ErrorType::TooMany
        )
    }
}

/// One problem with one field, e.g. `spec.disks[1].size: Invalid value: "0": must be greater than zero`.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldError {
    pub kind: ErrorType,
    pub field: String,
    pub value: Value,
    pub detail: String,
}

impl FieldError {
    fn new(kind: ErrorType, field: &FieldPath, value: Value, detail: impl Into<String>) -> Self {
        FieldError {
            kind,
            field: field.to_string(),
            value,
            detail: detail.into(),
        }
    }

    pub fn required(field: &FieldPath, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::Required, field, Value::Null, detail)
    }

    pub fn invalid(field: &FieldPath, value: impl Into<Value>, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::Invalid, field, value.into(), detail)
    }

    pub fn type_invalid(
        field: &FieldPath,
        value: impl Into<Value>,
        detail: impl Into<String>,
    ) -> Self {
        Self::new(ErrorType::TypeInvalid, field, value.into(), detail)
    }

    pub fn duplicate(field: &FieldPath, value: impl Into<Value>) -> Self {
        Self::new(ErrorType::Duplicate, field, value.into(), "")
    }

    pub fn forbidden(field: &FieldPath, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::Forbidden, field, Value::Null, detail)
    }

    pub fn too_long(field: &FieldPath, max: usize) -> Self {
        Self::new(
            ErrorType::TooLong,
            field,
            Value::Null,
            format!("may not be more than {max} bytes"),
        )
    }

    /// `Too many: 300: must have at most 256 items`, as Kubernetes' `field.TooMany`.
    pub fn too_many(field: &FieldPath, actual: usize, max: usize) -> Self {
        Self::new(
            ErrorType::TooMany,
            field,
            Value::Null,
            format!("{actual}: must have at most {max} items"),
        )
    }

    /// `Unsupported value: "x": supported values: "a", "b"`, the list sorted as Kubernetes does.
    pub fn not_supported<S: AsRef<str>>(
        field: &FieldPath,
        value: impl Into<Value>,
        supported: &[S],
    ) -> Self {
        let mut values: Vec<&str> = supported.iter().map(AsRef::as_ref).collect();
        values.sort_unstable();
        let list = values
            .iter()
            .map(|v| quote(v))
            .collect::<Vec<_>>()
            .join(", ");
        Self::new(
            ErrorType::NotSupported,
            field,
            value.into(),
            format!("supported values: {list}"),
        )
    }

    /// `Unsupported value: "x": <why>`, when what is allowed is a setting rather than a list.
    pub fn not_allowed(field: &FieldPath, value: impl Into<Value>, why: impl Into<String>) -> Self {
        Self::new(ErrorType::NotSupported, field, value.into(), why)
    }

    /// The message without the field path, as `StatusCause.message` carries it.
    pub fn body(&self) -> String {
        let mut s = self.kind.label().to_owned();
        if self.kind.shows_value() {
            s.push_str(": ");
            s.push_str(&render_value(&self.value));
        }
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.body())
    }
}

fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

/// A writer that refuses bytes past the echo limit, ending serialisation early.
struct Limited(Vec<u8>);

impl std::io::Write for Limited {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let room = (MAX_VALUE_CHARS + 4).saturating_sub(self.0.len());
        if room == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        let n = buf.len().min(room);
        self.0.extend_from_slice(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Values are echoed at most this long: a hostile body's megabyte string must not be copied
/// into every cause and the log line.
const MAX_VALUE_CHARS: usize = 256;

fn render_value(v: &Value) -> String {
    let mut s = match v {
        Value::String(s) => quote(s),
        other => {
            // Serialise no further than needed: the value may be a multi-megabyte array.
            let mut out = Limited(Vec::new());
            let _ = serde_json::to_writer(&mut out, other);
            String::from_utf8_lossy(&out.0).into_owned()
        }
    };
    if s.len() > MAX_VALUE_CHARS {
        let mut end = MAX_VALUE_CHARS;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push_str("...");
    }
    s
}

/// A field path in Kubernetes notation: `spec.disks[1].accessMode`.
///
/// A chain of borrowed segments, like Kubernetes' own `field.Path`: validation walks every field
/// of every request, and only the rare failing one needs its path as text.
#[derive(Clone, Copy, Debug)]
pub enum FieldPath<'a> {
    Root(&'a str),
    Child(&'a FieldPath<'a>, &'a str),
    Index(&'a FieldPath<'a>, usize),
}

impl<'a> FieldPath<'a> {
    pub fn new(root: &'a str) -> Self {
        FieldPath::Root(root)
    }

    pub fn child<'b>(&'b self, name: &'b str) -> FieldPath<'b> {
        FieldPath::Child(self, name)
    }

    pub fn index(&self, i: usize) -> FieldPath<'_> {
        FieldPath::Index(self, i)
    }
}

impl fmt::Display for FieldPath<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FieldPath::Root(root) => f.write_str(root),
            FieldPath::Child(parent, name) => {
                if matches!(parent, FieldPath::Root("")) {
                    f.write_str(name)
                } else {
                    write!(f, "{parent}.{name}")
                }
            }
            FieldPath::Index(parent, i) => write!(f, "{parent}[{i}]"),
        }
    }
}

/// Several field errors, shown like `apierrors.NewInvalid`: one bare, several in brackets.
pub fn join(errors: &[FieldError]) -> String {
    match errors {
        [one] => one.to_string(),
        many => format!(
            "[{}]",
            many.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_read_like_kubernetes() {
        let root = FieldPath::new("");
        let top = root.child("spec");
        assert_eq!(top.to_string(), "spec");
        let disks = top.child("disks");
        let second = disks.index(1);
        assert_eq!(second.child("size").to_string(), "spec.disks[1].size");
        assert_eq!(second.index(0).to_string(), "spec.disks[1][0]");
    }

    #[test]
    fn formats_like_kubernetes() {
        let spec = FieldPath::new("spec");
        let disks_list = spec.child("disks");
        let disks = disks_list.index(1);
        let e = FieldError::not_supported(
            &disks.child("accessMode"),
            "ReadWriteAll",
            &["ReadWriteOnce", "ReadWriteMany", "ReadOnlyMany"],
        );
        assert_eq!(
            e.to_string(),
            r#"spec.disks[1].accessMode: Unsupported value: "ReadWriteAll": supported values: "ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce""#
        );
        assert_eq!(
            FieldError::invalid(
                &FieldPath::new("spec")
                    .child("resources")
                    .child("cpu")
                    .child("cores"),
                300,
                "must be between 1 and 256, inclusive"
            )
            .to_string(),
            "spec.resources.cpu.cores: Invalid value: 300: must be between 1 and 256, inclusive"
        );
        assert_eq!(
            FieldError::required(&disks.child("name"), "").to_string(),
            "spec.disks[1].name: Required value"
        );
        assert_eq!(
            FieldError::duplicate(&disks.child("name"), "root").to_string(),
            r#"spec.disks[1].name: Duplicate value: "root""#
        );
        assert_eq!(
            FieldError::forbidden(
                &FieldPath::new("spec").child("disks"),
                "disk \"data\" may not be removed"
            )
            .to_string(),
            r#"spec.disks: Forbidden: disk "data" may not be removed"#
        );
        assert_eq!(
            FieldError::too_long(&FieldPath::new("metadata").child("name"), 63).body(),
            "Too long: may not be more than 63 bytes"
        );
        assert_eq!(
            FieldError::required(&disks, "").kind.cause_reason(),
            "FieldValueRequired"
        );
    }

    #[test]
    fn joins_one_bare_and_many_bracketed() {
        let p = FieldPath::new("spec");
        let a = FieldError::required(&p.child("a"), "");
        let b = FieldError::required(&p.child("b"), "");
        assert_eq!(join(std::slice::from_ref(&a)), "spec.a: Required value");
        assert_eq!(
            join(&[a, b]),
            "[spec.a: Required value, spec.b: Required value]"
        );
    }
}
