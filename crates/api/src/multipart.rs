//! `multipart/form-data` bodies (RFC 7578), as a browser sends a form with
//! a file: the console's GeoIP import. Only what a form needs: each part's
//! field name, file name and bytes; a part's own headers besides
//! `Content-Disposition` are ignored. The whole body is in memory (the
//! routes that take one bound it).

/// One part of a form: a field or a file.
#[derive(Debug, PartialEq, Eq)]
pub struct Part<'a> {
    pub name: String,
    pub filename: Option<String>,
    pub body: &'a [u8],
}

/// What is wrong with a multipart body, in words a form's sender can act on.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum MultipartError {
    #[error("the Content-Type multipart/form-data names no boundary")]
    NoBoundary,
    #[error("the form does not start with its boundary")]
    NoStart,
    #[error("part {0} of the form has no end of its headers")]
    Headers(usize),
    #[error("part {0} of the form has no field name (Content-Disposition: form-data; name=...)")]
    NoName(usize),
    #[error("part {0} of the form is not closed by the boundary (the upload was cut short?)")]
    Unclosed(usize),
}

/// The boundary of a `multipart/form-data` Content-Type; `None` for any
/// other type.
pub fn boundary(content_type: &str) -> Option<Result<String, MultipartError>> {
    let mut params = content_type.split(';');
    let kind = params.next()?.trim();
    if !kind.eq_ignore_ascii_case("multipart/form-data") {
        return None;
    }
    let found = params.find_map(|p| {
        let (k, v) = p.split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case("boundary")
            .then(|| v.trim().trim_matches('"').to_string())
    });
    Some(
        found
            .filter(|b| !b.is_empty())
            .ok_or(MultipartError::NoBoundary),
    )
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || haystack.len() < needle.len() {
        return None;
    }
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// A `key="value"` parameter of a Content-Disposition header.
fn param(header: &str, key: &str) -> Option<String> {
    header.split(';').find_map(|p| {
        let (k, v) = p.split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case(key)
            .then(|| v.trim().trim_matches('"').to_string())
    })
}

/// Every part of `body`, in order.
pub fn parts<'a>(body: &'a [u8], boundary: &str) -> Result<Vec<Part<'a>>, MultipartError> {
    let open = format!("--{boundary}");
    let delimiter = format!("\r\n--{boundary}");
    let start = find(body, open.as_bytes()).ok_or(MultipartError::NoStart)?;
    let mut rest = &body[start + open.len()..];
    let mut parts = Vec::new();
    loop {
        // After a boundary: `--` ends the form, CRLF starts a part.
        if rest.starts_with(b"--") {
            return Ok(parts);
        }
        let n = parts.len() + 1;
        rest = rest
            .strip_prefix(b"\r\n")
            .ok_or(MultipartError::Unclosed(n))?;
        let end = find(rest, b"\r\n\r\n").ok_or(MultipartError::Headers(n))?;
        let headers = String::from_utf8_lossy(&rest[..end]);
        let disposition = headers
            .split("\r\n")
            .find_map(|h| {
                let (k, v) = h.split_once(':')?;
                k.trim()
                    .eq_ignore_ascii_case("content-disposition")
                    .then_some(v)
            })
            .unwrap_or("");
        let name = param(disposition, "name").ok_or(MultipartError::NoName(n))?;
        let filename = param(disposition, "filename");
        let content = &rest[end + 4..];
        let stop = find(content, delimiter.as_bytes()).ok_or(MultipartError::Unclosed(n))?;
        parts.push(Part {
            name,
            filename,
            body: &content[..stop],
        });
        rest = &content[stop + delimiter.len()..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FORM: &[u8] = b"--XyZ\r\nContent-Disposition: form-data; name=\"csrf\"\r\n\r\ntok\r\n--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"c.mmdb\"\r\nContent-Type: application/octet-stream\r\n\r\n\x00\x01\r\n--X\xff\r\n--XyZ--\r\n";

    #[test]
    fn a_form_with_a_file_gives_its_parts() {
        let b = boundary("multipart/form-data; boundary=XyZ")
            .unwrap()
            .unwrap();
        let got = parts(FORM, &b).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!((got[0].name.as_str(), got[0].body), ("csrf", &b"tok"[..]));
        assert_eq!(got[1].filename.as_deref(), Some("c.mmdb"));
        assert_eq!(got[1].body, b"\x00\x01\r\n--X\xff");
    }

    #[test]
    fn other_types_and_broken_forms_are_told_apart() {
        assert_eq!(boundary("application/x-www-form-urlencoded"), None);
        assert_eq!(
            boundary("multipart/form-data"),
            Some(Err(MultipartError::NoBoundary))
        );
        assert_eq!(parts(b"nothing", "XyZ"), Err(MultipartError::NoStart));
        let cut = &FORM[..FORM.len() - 12];
        assert_eq!(parts(cut, "XyZ"), Err(MultipartError::Unclosed(2)));
        assert_eq!(
            parts(
                b"--XyZ\r\nContent-Type: text/plain\r\n\r\nx\r\n--XyZ--",
                "XyZ"
            ),
            Err(MultipartError::NoName(1))
        );
        assert_eq!(
            parts(b"--XyZ\r\nno end", "XyZ"),
            Err(MultipartError::Headers(1))
        );
    }
}
