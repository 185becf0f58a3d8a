//! Frame Streams (<https://farsightsec.github.io/fstrm/>), the transport
//! of dnstap: data frames behind a 4-byte big-endian length, and control
//! frames behind an escape (a length of 0).
//!
//! A file holds START (with the content type), the data frames, STOP. A
//! socket is bidirectional: the writer sends READY with the content types
//! it offers, the reader answers ACCEPT with the one it takes, the writer
//! sends START, the data frames, then STOP, and the reader answers
//! FINISH.

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt};

/// The content type of dnstap's frames.
pub const CONTENT_TYPE: &[u8] = b"protobuf:dnstap.Dnstap";

/// Control frame types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Control {
    Accept = 1,
    Start = 2,
    Stop = 3,
    Ready = 4,
    Finish = 5,
}

impl Control {
    fn of(code: u32) -> Option<Self> {
        Some(match code {
            1 => Self::Accept,
            2 => Self::Start,
            3 => Self::Stop,
            4 => Self::Ready,
            5 => Self::Finish,
            _ => return None,
        })
    }
}

/// The control field that names a content type.
const FIELD_CONTENT_TYPE: u32 = 1;

/// The longest control frame a reader may send (fstrm's limit).
pub const MAX_CONTROL: usize = 512;

/// A control frame, escaped: `0`, its length, its type, and the content
/// type when given (START, READY, ACCEPT).
pub fn control(kind: Control, content_type: Option<&[u8]>) -> Vec<u8> {
    let fields = content_type.map_or(0, |c| 8 + c.len());
    let len = 4 + fields;
    let mut out = Vec::with_capacity(8 + len);
    out.extend_from_slice(&0u32.to_be_bytes());
    out.extend_from_slice(&(len as u32).to_be_bytes());
    out.extend_from_slice(&(kind as u32).to_be_bytes());
    if let Some(c) = content_type {
        out.extend_from_slice(&FIELD_CONTENT_TYPE.to_be_bytes());
        out.extend_from_slice(&(c.len() as u32).to_be_bytes());
        out.extend_from_slice(c);
    }
    out
}

/// Appends one data frame: its length, then `payload` (never empty: a
/// length of 0 is the escape).
pub fn push_data(out: &mut Vec<u8>, payload: &[u8]) {
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(payload);
}

/// A control frame as read: its type and the content types it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Read {
    pub kind: Control,
    pub content_types: Vec<Vec<u8>>,
}

/// Why a reader's frame was refused.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("the reader sent a data frame where a control frame was due")]
    NotControl,
    #[error("the reader sent a control frame of {0} bytes (at most 512)")]
    TooLong(usize),
    #[error("the reader sent a control frame that does not read: {0}")]
    Malformed(&'static str),
}

/// Reads one control frame.
pub async fn read_control(read: &mut (impl AsyncRead + Unpin)) -> Result<Read, FrameError> {
    if read.read_u32().await? != 0 {
        return Err(FrameError::NotControl);
    }
    let len = read.read_u32().await? as usize;
    if len > MAX_CONTROL {
        return Err(FrameError::TooLong(len));
    }
    let mut body = vec![0; len];
    read.read_exact(&mut body).await?;
    parse_control(&body)
}

/// A control frame's body (after the escape and the length).
pub fn parse_control(body: &[u8]) -> Result<Read, FrameError> {
    let word = |at: usize| -> Option<u32> {
        let b = body.get(at..at.checked_add(4)?)?;
        Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    };
    let kind = word(0)
        .and_then(Control::of)
        .ok_or(FrameError::Malformed("an unknown control type"))?;
    let mut content_types = Vec::new();
    let mut at = 4;
    while at < body.len() {
        let field = word(at).ok_or(FrameError::Malformed("a field cut short"))?;
        let len = word(at + 4).ok_or(FrameError::Malformed("a field cut short"))? as usize;
        let start = at + 8;
        let value = start
            .checked_add(len)
            .and_then(|end| body.get(start..end))
            .ok_or(FrameError::Malformed("a field longer than its frame"))?;
        if field == FIELD_CONTENT_TYPE {
            content_types.push(value.to_vec());
        }
        at = start + len;
    }
    Ok(Read {
        kind,
        content_types,
    })
}

/// The data frames of a whole unidirectional stream (a file): START,
/// the frames, STOP. A stream cut short (no STOP) gives the frames it
/// holds; one that does not start with START is an error.
pub fn data_frames(stream: &[u8]) -> Result<Vec<&[u8]>, FrameError> {
    let word = |at: usize| -> Option<usize> {
        let b = stream.get(at..at.checked_add(4)?)?;
        Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
    };
    let mut frames = Vec::new();
    let mut at = 0;
    let mut started = false;
    while let Some(len) = word(at) {
        if len == 0 {
            let clen = word(at + 4).ok_or(FrameError::Malformed("a control frame cut short"))?;
            let body = stream
                .get(at + 8..(at + 8).saturating_add(clen))
                .ok_or(FrameError::Malformed("a control frame cut short"))?;
            match parse_control(body)?.kind {
                Control::Start => started = true,
                Control::Stop => return Ok(frames),
                _ => {
                    return Err(FrameError::Malformed(
                        "a control frame a file does not hold",
                    ));
                }
            }
            at += 8 + clen;
            continue;
        }
        if !started {
            return Err(FrameError::Malformed("data before START"));
        }
        match stream.get(at + 4..(at + 4).saturating_add(len)) {
            Some(frame) => frames.push(frame),
            None => return Ok(frames),
        }
        at += 4 + len;
    }
    if !started {
        return Err(FrameError::Malformed("no START"));
    }
    Ok(frames)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_frames_are_escaped_and_read_back() {
        let f = control(Control::Start, Some(CONTENT_TYPE));
        assert_eq!(&f[..4], &[0, 0, 0, 0]);
        assert_eq!(
            u32::from_be_bytes(f[4..8].try_into().unwrap()) as usize,
            f.len() - 8
        );
        let read = parse_control(&f[8..]).unwrap();
        assert_eq!(read.kind, Control::Start);
        assert_eq!(read.content_types, vec![CONTENT_TYPE.to_vec()]);
        let stop = control(Control::Stop, None);
        assert_eq!(stop, [0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 3]);
    }

    #[test]
    fn a_frame_that_does_not_read_is_an_error_not_a_panic() {
        for body in [
            &[][..],
            &[0, 0, 0, 9],
            &[0, 0, 0, 1, 0, 0, 0, 1],
            &[0, 0, 0, 1, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff],
            &[0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 5, b'a'],
        ] {
            assert!(parse_control(body).is_err(), "{body:?}");
        }
        let accept = parse_control(&[0, 0, 0, 1]).unwrap();
        assert_eq!(accept.kind, Control::Accept);
        assert!(accept.content_types.is_empty());
    }

    #[test]
    fn a_file_s_frames_are_read_back() {
        let mut file = control(Control::Start, Some(CONTENT_TYPE));
        push_data(&mut file, b"one");
        push_data(&mut file, b"two");
        file.extend_from_slice(&control(Control::Stop, None));
        assert_eq!(data_frames(&file).unwrap(), [&b"one"[..], &b"two"[..]]);
        // Cut anywhere: never a panic.
        for end in 0..file.len() {
            let _ = data_frames(&file[..end]);
        }
        assert!(data_frames(&file[12..]).is_err());
    }

    #[tokio::test]
    async fn a_reader_s_accept_is_read_from_a_stream() {
        let f = control(Control::Accept, Some(CONTENT_TYPE));
        let read = read_control(&mut &f[..]).await.unwrap();
        assert_eq!(read.kind, Control::Accept);
        let mut data = Vec::new();
        push_data(&mut data, b"x");
        assert!(matches!(
            read_control(&mut &data[..]).await,
            Err(FrameError::NotControl)
        ));
        let mut long = vec![0, 0, 0, 0];
        long.extend_from_slice(&10_000u32.to_be_bytes());
        assert!(matches!(
            read_control(&mut &long[..]).await,
            Err(FrameError::TooLong(10_000))
        ));
    }
}
