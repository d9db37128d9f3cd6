//! The AMQP 1.0 type system (OASIS AMQP 1.0, part 1), decoded for reading: what an amqp-value
//! or amqp-sequence body holds. Decoding only; bounded and total: nesting stops at
//! [`MAX_DEPTH`], a body yields at most [`MAX_VALUES`] values, nothing is allocated by a
//! count the input declares, and any input (truncated, malformed, hostile) gives a value or an
//! [`Error`], never a panic.

use std::fmt;

/// How many levels of lists, maps, arrays and described values a value may have (as
/// `value::MAX_DEPTH` for header values).
pub const MAX_DEPTH: usize = 32;
/// Most values one decode yields: an array of 2^32 nulls takes no bytes per element.
pub const MAX_VALUES: usize = 100_000;

/// One AMQP 1.0 value. Integer widths are folded (signed and unsigned), as a reader needs them.
#[derive(Clone, Debug, PartialEq)]
pub enum Amqp {
    Null,
    Bool(bool),
    Uint(u64),
    Int(i64),
    Float(f64),
    /// decimal32/64/128: the encoding's bytes (IEEE 754 decimal), shown as such.
    Decimal(Vec<u8>),
    Char(char),
    /// Milliseconds since the Unix epoch.
    Timestamp(i64),
    Uuid([u8; 16]),
    Binary(Vec<u8>),
    /// UTF-8 as declared; invalid sequences replaced.
    String(String),
    Symbol(String),
    List(Vec<Amqp>),
    Map(Vec<(Amqp, Amqp)>),
    Array(Vec<Amqp>),
    Described(Box<Amqp>, Box<Amqp>),
}

/// Why a value could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// The input ends inside a value.
    Truncated,
    /// A constructor byte the type system does not define.
    Constructor(u8),
    /// Nested deeper than [`MAX_DEPTH`].
    TooDeep,
    /// More than [`MAX_VALUES`] values.
    TooMany,
    /// A compound's declared size or count does not fit what it holds.
    Malformed(&'static str),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Truncated => f.write_str("the encoding ends early"),
            Error::Constructor(c) => write!(f, "unknown type constructor 0x{c:02x}"),
            Error::TooDeep => write!(f, "nested deeper than {MAX_DEPTH} levels"),
            Error::TooMany => write!(f, "more than {MAX_VALUES} values"),
            Error::Malformed(what) => f.write_str(what),
        }
    }
}

/// A reader over the input with the budget of one decode.
pub(crate) struct Reader<'a> {
    input: &'a [u8],
    pos: usize,
    values: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(input: &'a [u8]) -> Reader<'a> {
        Reader {
            input,
            pos: 0,
            values: 0,
        }
    }

    pub(crate) fn at_end(&self) -> bool {
        self.pos >= self.input.len()
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], Error> {
        let end = self.pos.checked_add(n).ok_or(Error::Truncated)?;
        let bytes = self.input.get(self.pos..end).ok_or(Error::Truncated)?;
        self.pos = end;
        Ok(bytes)
    }

    fn byte(&mut self) -> Result<u8, Error> {
        Ok(self.take(1)?[0])
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], Error> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn count(&mut self) -> Result<(), Error> {
        self.values += 1;
        if self.values > MAX_VALUES {
            Err(Error::TooMany)
        } else {
            Ok(())
        }
    }

    /// One value: its constructor, then its data.
    pub(crate) fn value(&mut self, depth: usize) -> Result<Amqp, Error> {
        let code = self.byte()?;
        if code == 0x00 {
            if depth >= MAX_DEPTH {
                return Err(Error::TooDeep);
            }
            self.count()?;
            let descriptor = self.value(depth + 1)?;
            let value = self.value(depth + 1)?;
            return Ok(Amqp::Described(Box::new(descriptor), Box::new(value)));
        }
        self.data(code, depth)
    }

    /// The data of one value whose constructor is `code` (for an array, each element's).
    fn data(&mut self, code: u8, depth: usize) -> Result<Amqp, Error> {
        self.count()?;
        let v = match code {
            0x40 => Amqp::Null,
            0x41 => Amqp::Bool(true),
            0x42 => Amqp::Bool(false),
            0x56 => Amqp::Bool(self.byte()? != 0),
            0x43 | 0x44 => Amqp::Uint(0),
            0x50 | 0x52 | 0x53 => Amqp::Uint(u64::from(self.byte()?)),
            0x60 => Amqp::Uint(u64::from(u16::from_be_bytes(self.array()?))),
            0x70 => Amqp::Uint(u64::from(u32::from_be_bytes(self.array()?))),
            0x80 => Amqp::Uint(u64::from_be_bytes(self.array()?)),
            0x51 | 0x54 | 0x55 => Amqp::Int(i64::from(self.byte()? as i8)),
            0x61 => Amqp::Int(i64::from(i16::from_be_bytes(self.array()?))),
            0x71 => Amqp::Int(i64::from(i32::from_be_bytes(self.array()?))),
            0x81 => Amqp::Int(i64::from_be_bytes(self.array()?)),
            0x72 => Amqp::Float(f64::from(f32::from_be_bytes(self.array()?))),
            0x82 => Amqp::Float(f64::from_be_bytes(self.array()?)),
            0x74 => Amqp::Decimal(self.take(4)?.to_vec()),
            0x84 => Amqp::Decimal(self.take(8)?.to_vec()),
            0x94 => Amqp::Decimal(self.take(16)?.to_vec()),
            0x73 => {
                Amqp::Char(char::from_u32(u32::from_be_bytes(self.array()?)).unwrap_or('\u{fffd}'))
            }
            0x83 => Amqp::Timestamp(i64::from_be_bytes(self.array()?)),
            0x98 => Amqp::Uuid(self.array()?),
            0xa0 | 0xb0 | 0xa1 | 0xb1 | 0xa3 | 0xb3 => {
                let n = self.width(code)?;
                let bytes = self.take(n)?;
                match code {
                    0xa0 | 0xb0 => Amqp::Binary(bytes.to_vec()),
                    0xa1 | 0xb1 => Amqp::String(String::from_utf8_lossy(bytes).into_owned()),
                    _ => Amqp::Symbol(String::from_utf8_lossy(bytes).into_owned()),
                }
            }
            0x45 => Amqp::List(Vec::new()),
            0xc0 | 0xd0 => Amqp::List(self.compound(code, depth)?),
            0xc1 | 0xd1 => {
                let items = self.compound(code, depth)?;
                if items.len() % 2 != 0 {
                    return Err(Error::Malformed("a map with an odd number of elements"));
                }
                let mut pairs = Vec::with_capacity(items.len() / 2);
                let mut it = items.into_iter();
                while let (Some(k), Some(v)) = (it.next(), it.next()) {
                    pairs.push((k, v));
                }
                Amqp::Map(pairs)
            }
            0xe0 | 0xf0 => Amqp::Array(self.array_of(code, depth)?),
            other => return Err(Error::Constructor(other)),
        };
        Ok(v)
    }

    /// A size or count: one byte for the `…8` codes (high nibble `a`, `c`, `e`), else four.
    fn width(&mut self, code: u8) -> Result<usize, Error> {
        if matches!(code >> 4, 0xa | 0xc | 0xe) {
            Ok(usize::from(self.byte()?))
        } else {
            usize::try_from(u32::from_be_bytes(self.array()?))
                .map_err(|_| Error::Malformed("a size this machine cannot hold"))
        }
    }

    /// A list's, map's or array's body (its size, then the bytes that size holds) as a reader of
    /// its own, and the element count it starts with.
    fn sized(&mut self, code: u8, depth: usize) -> Result<(Reader<'a>, usize), Error> {
        if depth >= MAX_DEPTH {
            return Err(Error::TooDeep);
        }
        let size = self.width(code)?;
        let body = self.take(size)?;
        let mut inner = Reader {
            input: body,
            pos: 0,
            values: self.values,
        };
        let count = inner.width(code)?;
        Ok((inner, count))
    }

    /// The elements of a list or map: size, count, then that many values inside the size.
    fn compound(&mut self, code: u8, depth: usize) -> Result<Vec<Amqp>, Error> {
        let (mut inner, count) = self.sized(code, depth)?;
        let mut items = Vec::new();
        for _ in 0..count {
            if inner.at_end() {
                return Err(Error::Malformed(
                    "a compound holds fewer values than it says",
                ));
            }
            items.push(inner.value(depth + 1)?);
        }
        self.values = inner.values;
        Ok(items)
    }

    /// An array: size, count, one constructor (possibly described), then each element's data.
    fn array_of(&mut self, code: u8, depth: usize) -> Result<Vec<Amqp>, Error> {
        let (mut inner, count) = self.sized(code, depth)?;
        if count == 0 {
            self.values = inner.values;
            return Ok(Vec::new());
        }
        let mut element = inner.byte()?;
        let before = inner.values;
        let descriptor = if element == 0x00 {
            let d = inner.value(depth + 1)?;
            element = inner.byte()?;
            Some(d)
        } else {
            None
        };
        // Each element carries a copy of the descriptor: its values count again for each, so a
        // large descriptor on many elements cannot multiply past the bound.
        let copies = inner.values - before;
        let mut items = Vec::new();
        for _ in 0..count {
            if descriptor.is_some() {
                inner.values = inner.values.saturating_add(copies);
                if inner.values > MAX_VALUES {
                    return Err(Error::TooMany);
                }
            }
            let v = inner.data(element, depth + 1)?;
            items.push(match &descriptor {
                Some(d) => Amqp::Described(Box::new(d.clone()), Box::new(v)),
                None => v,
            });
        }
        self.values = inner.values;
        Ok(items)
    }
}

/// Decodes exactly one value from `input`; bytes after it are an error.
pub fn decode(input: &[u8]) -> Result<Amqp, Error> {
    let mut r = Reader::new(input);
    let v = r.value(0)?;
    if r.at_end() {
        Ok(v)
    } else {
        Err(Error::Malformed("bytes after the value"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An array whose large descriptor is copied onto many elements is refused, not multiplied.
    #[test]
    fn a_large_descriptor_on_many_elements_counts_against_the_bound() {
        // array32 of 3 nulls described by a list of 50,000 nulls: 4 copies of 50,001 values.
        let mut desc = vec![0xd0];
        let list_body: Vec<u8> = std::iter::repeat_n(0x40u8, 50_000).collect();
        desc.extend(((list_body.len() + 4) as u32).to_be_bytes());
        desc.extend(50_000u32.to_be_bytes());
        desc.extend(&list_body);
        let mut body = 3u32.to_be_bytes().to_vec();
        body.push(0x00);
        body.extend(&desc);
        body.push(0x40);
        let mut input = vec![0xf0];
        input.extend((body.len() as u32).to_be_bytes());
        input.extend(body);
        assert_eq!(decode(&input), Err(Error::TooMany));
    }

    #[test]
    fn scalars() {
        assert_eq!(decode(&[0x40]), Ok(Amqp::Null));
        assert_eq!(decode(&[0x41]), Ok(Amqp::Bool(true)));
        assert_eq!(decode(&[0x56, 0x00]), Ok(Amqp::Bool(false)));
        assert_eq!(decode(&[0x53, 0x2a]), Ok(Amqp::Uint(42)));
        assert_eq!(decode(&[0x80, 0, 0, 0, 0, 0, 0, 1, 0]), Ok(Amqp::Uint(256)));
        assert_eq!(decode(&[0x54, 0xff]), Ok(Amqp::Int(-1)));
        assert_eq!(decode(&[0x71, 0xff, 0xff, 0xff, 0xfe]), Ok(Amqp::Int(-2)));
        assert_eq!(
            decode(&[0x82, 0x40, 0x0c, 0, 0, 0, 0, 0, 0]),
            Ok(Amqp::Float(3.5))
        );
        assert_eq!(
            decode(&[0xa1, 3, b'a', b'b', b'c']),
            Ok(Amqp::String("abc".into()))
        );
        assert_eq!(
            decode(&[0xb3, 0, 0, 0, 1, b'x']),
            Ok(Amqp::Symbol("x".into()))
        );
        assert_eq!(decode(&[0x73, 0, 0, 0x00, 0xe9]), Ok(Amqp::Char('é')));
        let mut uuid = vec![0x98];
        uuid.extend(1..=16u8);
        assert!(matches!(decode(&uuid), Ok(Amqp::Uuid(u)) if u[15] == 16));
    }

    #[test]
    fn compounds() {
        // list8 [1, "a"], map8 {"k": null}, array8 of three smallints
        let list = [0xc0, 6, 2, 0x53, 1, 0xa1, 1, b'a'];
        assert_eq!(
            decode(&list),
            Ok(Amqp::List(vec![Amqp::Uint(1), Amqp::String("a".into())]))
        );
        let map = [0xc1, 5, 2, 0xa1, 1, b'k', 0x40];
        assert_eq!(
            decode(&map),
            Ok(Amqp::Map(vec![(Amqp::String("k".into()), Amqp::Null)]))
        );
        let array = [0xe0, 5, 3, 0x54, 1, 2, 3];
        assert_eq!(
            decode(&array),
            Ok(Amqp::Array(vec![Amqp::Int(1), Amqp::Int(2), Amqp::Int(3)]))
        );
        assert_eq!(decode(&[0x45]), Ok(Amqp::List(vec![])));
        // described: descriptor smallulong 0x77, value "x"
        assert_eq!(
            decode(&[0x00, 0x53, 0x77, 0xa1, 1, b'x']),
            Ok(Amqp::Described(
                Box::new(Amqp::Uint(0x77)),
                Box::new(Amqp::String("x".into()))
            ))
        );
    }

    #[test]
    fn malformed_input_is_an_error_not_a_panic() {
        assert_eq!(decode(&[]), Err(Error::Truncated));
        assert_eq!(decode(&[0xa1, 10, b'a']), Err(Error::Truncated));
        assert_eq!(decode(&[0x80, 1, 2]), Err(Error::Truncated));
        assert_eq!(decode(&[0x0f]), Err(Error::Constructor(0x0f)));
        assert_eq!(
            decode(&[0xb1, 0xff, 0xff, 0xff, 0xff]),
            Err(Error::Truncated)
        );
        // a list that says it holds 9 values in 1 byte
        assert!(decode(&[0xc0, 1, 9]).is_err());
        // a map with three elements
        assert!(decode(&[0xc1, 4, 3, 0x40, 0x40, 0x40]).is_err());
        assert!(decode(&[0x40, 0x40]).is_err());
        // an array of 2^32-1 nulls in 9 bytes: bounded by the value budget
        assert_eq!(
            decode(&[0xf0, 0, 0, 0, 5, 0xff, 0xff, 0xff, 0xff, 0x40]),
            Err(Error::TooMany)
        );
    }

    #[test]
    fn deep_nesting_stops() {
        // 10,000 nested list8s, each claiming the rest: refused at the depth bound.
        let mut deep = Vec::new();
        for _ in 0..10_000 {
            deep.extend([0xc0, 0xff, 1]);
        }
        assert!(decode(&deep).is_err());
        let mut described = vec![0x00; 100_000];
        described.push(0x40);
        assert_eq!(decode(&described), Err(Error::TooDeep));
    }
}
