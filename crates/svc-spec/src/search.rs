//! Search, as both storage engines see it: the words of a record (its kind's name fields and
//! text fields, from the kinds table) and the words of a person's query, made comparable the
//! same way before either engine sees them. Folding puts letters in lower case and takes
//! accents off ("Café" and "cafe" are one word), keeps letters and digits and splits on
//! everything else, and makes each character of a script written without spaces (Chinese,
//! Japanese, Thai...) a word of its own, so that a run of them is found by any part of it
//! (a phrase of adjacent characters). Both engines then split on spaces only, so they find
//! the same records.

use crate::RecordView;
use crate::path::JsonPath;
use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

/// Changes whenever folding changes, so that search indexes built before are built again.
pub const FOLDING_VERSION: &str = "fold-1";

/// Where a kind's searchable words are: name fields (weighted above the rest) and text fields,
/// each a path of the kinds table.
#[derive(Debug, Clone, Default)]
pub struct SearchFields {
    pub name: Vec<JsonPath>,
    pub text: Vec<JsonPath>,
}

/// A record's searchable words, folded: each a run of letters and digits, one space apart.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SearchText {
    pub name: String,
    pub text: String,
}

impl SearchText {
    pub fn is_empty(&self) -> bool {
        self.name.is_empty() && self.text.is_empty()
    }
}

/// The most of a record's text search reads, folded, per field kind: a record's words past
/// it are not found (records of the family are short; a long one is found by its start).
pub const MAX_FOLDED_BYTES: usize = 32 * 1024;

impl SearchFields {
    /// The record's words under these fields; `None` when it has none.
    pub fn text_of(&self, record: &RecordView) -> Option<SearchText> {
        let gather = |paths: &[JsonPath]| {
            let mut out = String::new();
            for path in paths {
                for value in path.values_in(record) {
                    if let Some(text) = value.as_str() {
                        fold_into(text, &mut out, MAX_FOLDED_BYTES);
                    }
                }
            }
            out
        };
        let text = SearchText {
            name: gather(&self.name),
            text: gather(&self.text),
        };
        (!text.is_empty()).then_some(text)
    }
}

/// Whether `c` belongs to a script written without spaces between words: each such
/// character is a word of its own.
pub fn unspaced(c: char) -> bool {
    matches!(c as u32,
        0x0E00..=0x0EFF          // Thai, Lao
        | 0x1000..=0x109F        // Myanmar
        | 0x1780..=0x17FF        // Khmer
        | 0x3040..=0x30FF        // Hiragana, Katakana
        | 0x31F0..=0x31FF        // Katakana phonetic extensions
        | 0x3400..=0x4DBF        // CJK extension A
        | 0x4E00..=0x9FFF        // CJK unified ideographs
        | 0xF900..=0xFAFF        // CJK compatibility ideographs
        | 0xFF66..=0xFF9F        // half-width Katakana
        | 0x20000..=0x3134F) // CJK extensions B-G
}

/// One folded character: a letter or digit (lower case, its accents gone), or `None` for a
/// character that separates words.
fn folded(c: char, out: &mut impl FnMut(char)) {
    for lower in c.to_lowercase() {
        if lower.is_alphanumeric() && !is_combining_mark(lower) {
            out(lower);
        }
    }
}

/// Appends the words of `text`, folded, to `out` (a space before each word when `out` holds
/// some), stopping before `out` passes `limit` bytes.
pub fn fold_into(text: &str, out: &mut String, limit: usize) {
    let mut in_word = false;
    let mut word_start = out.len();
    // Compatibility decomposition: full-width Latin, ligatures and the like read as the
    // letters they show.
    for c in text.nfkd() {
        if out.len() + 8 > limit {
            // A word cut short would be a word the record does not hold.
            if in_word {
                out.truncate(word_start);
            }
            break;
        }
        if is_combining_mark(c) {
            continue;
        }
        let mut pushed = false;
        folded(c, &mut |letter| {
            let alone = unspaced(letter);
            if (!in_word || alone) && !out.is_empty() && !out.ends_with(' ') {
                out.push(' ');
            }
            if !in_word {
                word_start = out.len();
            }
            out.push(letter);
            in_word = !alone;
            if alone {
                out.push(' ');
            }
            pushed = true;
        });
        if !pushed {
            in_word = false;
        }
    }
    while out.ends_with(' ') {
        out.pop();
    }
}

/// The words of `text`, folded.
pub fn fold(text: &str) -> Vec<String> {
    let mut out = String::new();
    fold_into(text, &mut out, usize::MAX);
    out.split(' ')
        .filter(|word| !word.is_empty())
        .map(str::to_string)
        .collect()
}

/// What a search asks for: every term must match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchQuery {
    pub terms: Vec<Term>,
}

/// One term: a word, a phrase (words adjacent, in order), or a word's start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Term {
    Word(String),
    Phrase(Vec<String>),
    Prefix(String),
}

/// The most matches a search counts: its `total` is exact up to it, a lower bound past it.
pub const COUNT_LIMIT: u64 = 10_000;

/// The longest query, in characters.
pub const MAX_QUERY_CHARS: usize = 256;
/// Terms a query searches for at most: each is a lookup in the index, and a record needs
/// every one.
pub const MAX_TERMS: usize = 16;
/// The shortest word start searched as a prefix: a shorter one would name most of the index.
pub const MIN_PREFIX_CHARS: usize = 3;

impl SearchQuery {
    /// Reads a person's query: words in any order, "a phrase" in double quotes, the last word
    /// (when nothing follows it) as a prefix. A word of a script without spaces is a phrase
    /// of its characters. At most [`MAX_TERMS`] terms are kept; a query of no letter or digit
    /// has none, and finds nothing. The error (a length out of bounds) is for a 400.
    pub fn parse(q: &str) -> Result<SearchQuery, String> {
        let length = q.chars().count();
        if length == 0 || length > MAX_QUERY_CHARS {
            return Err(format!(
                "q: must be 1 to {MAX_QUERY_CHARS} characters, not {length}"
            ));
        }
        let mut terms: Vec<Term> = Vec::new();
        let ends_open = !q.ends_with(|c: char| c.is_whitespace() || c == '"');
        let pieces: Vec<&str> = q.split('"').collect();
        let last_loose = (pieces.len() - 1) / 2 * 2;
        for (at, piece) in pieces.iter().enumerate() {
            // Odd pieces are inside quotes (an unclosed quote runs to the end).
            if at % 2 == 1 {
                let words = fold(piece);
                if !words.is_empty() {
                    terms.push(Term::Phrase(words));
                }
                continue;
            }
            let words: Vec<&str> = piece.split_whitespace().collect();
            for (index, word) in words.iter().enumerate() {
                let folded = fold(word);
                let open = at == last_loose && index + 1 == words.len() && ends_open;
                terms.extend(term_of(folded, open));
            }
        }
        let mut unique: Vec<Term> = Vec::new();
        for term in terms {
            if !unique.contains(&term) {
                unique.push(term);
            }
        }
        let mut terms = unique;
        // Past the 16th, terms are not searched: each is a lookup, and a record needs all.
        terms.truncate(MAX_TERMS);
        Ok(SearchQuery { terms })
    }

    /// Whether a folded word is one the query searches for (or starts as its prefix term
    /// does): what marks the words a search found.
    pub fn matches(&self, word: &str) -> bool {
        self.terms.iter().any(|term| match term {
            Term::Word(searched) => searched == word,
            Term::Prefix(start) => word.starts_with(start.as_str()),
            Term::Phrase(words) => words.iter().any(|searched| searched == word),
        })
    }

    /// Every folded word the query names.
    #[cfg(test)]
    fn words(&self) -> impl Iterator<Item = &str> {
        self.terms
            .iter()
            .flat_map(|term| match term {
                Term::Word(word) | Term::Prefix(word) => std::slice::from_ref(word).iter(),
                Term::Phrase(words) => words.iter(),
            })
            .map(String::as_str)
    }
}

/// The terms of one space-free word of a query, folded into `words`: one word; several
/// (punctuation inside it, `geo-json`) as a phrase; the last, when `open`, as a prefix.
fn term_of(words: Vec<String>, open: bool) -> Option<Term> {
    match words.len() {
        0 => None,
        1 => {
            let word = words.into_iter().next()?;
            let prefix =
                open && word.chars().count() >= MIN_PREFIX_CHARS && !word.chars().any(unspaced);
            Some(match prefix {
                true => Term::Prefix(word),
                false => Term::Word(word),
            })
        }
        _ => Some(Term::Phrase(words)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folding_lowers_takes_accents_off_and_splits_unspaced_scripts() {
        assert_eq!(fold("Café au LAIT"), ["cafe", "au", "lait"]);
        assert_eq!(fold("GeoJSON→KML, v2.1"), ["geojson", "kml", "v2", "1"]);
        assert_eq!(fold("東京都の地図"), ["東", "京", "都", "の", "地", "図"]);
        assert_eq!(fold("Dublin東京Core"), ["dublin", "東", "京", "core"]);
        assert_eq!(fold("Ångström Ærø ﬁne"), ["angstrom", "ærø", "fine"]);
        assert_eq!(fold("\u{202E}abc\u{0000}def"), ["abc", "def"]);
        assert!(fold("*** ^ () : -").is_empty());
    }

    #[test]
    fn folding_stops_at_its_limit_on_a_word_boundary() {
        let mut out = String::new();
        fold_into(&"word ".repeat(10_000), &mut out, 64);
        assert!(out.len() <= 64, "{out}");
        assert!(out.split(' ').all(|w| w == "word"), "{out}");
    }

    #[test]
    fn a_query_reads_words_phrases_and_a_last_prefix() {
        let q = SearchQuery::parse("lens \"Dublin Core\" geoj").unwrap();
        assert_eq!(
            q.terms,
            [
                Term::Word("lens".into()),
                Term::Phrase(vec!["dublin".into(), "core".into()]),
                Term::Prefix("geoj".into()),
            ]
        );
        let closed = SearchQuery::parse("geoj ").unwrap();
        assert_eq!(closed.terms, [Term::Word("geoj".into())]);
        let short = SearchQuery::parse("ab").unwrap();
        assert_eq!(short.terms, [Term::Word("ab".into())]);
        let cjk = SearchQuery::parse("京都").unwrap();
        assert_eq!(cjk.terms, [Term::Phrase(vec!["京".into(), "都".into()])]);
        let hyphen = SearchQuery::parse("geo-json kml").unwrap();
        assert_eq!(
            hyphen.terms[0],
            Term::Phrase(vec!["geo".into(), "json".into()])
        );
    }

    #[test]
    fn hostile_queries_are_refused_by_name_or_read_as_words() {
        for bad in ["", &"x".repeat(257)] {
            assert!(SearchQuery::parse(bad).is_err(), "{bad:?}");
        }
        for nothing in ["***", "\"\"", "\u{0}"] {
            let query = SearchQuery::parse(nothing).unwrap();
            assert!(query.terms.is_empty(), "{nothing:?}");
        }
        assert_eq!(SearchQuery::parse("a\u{0}b").unwrap().words().count(), 2);
        let many: Vec<String> = (0..20).map(|i| format!("w{i}")).collect();
        let kept = SearchQuery::parse(&many.join(" ")).unwrap().terms.len();
        assert_eq!(kept, MAX_TERMS);
        let syntax = SearchQuery::parse("a OR b NEAR(c) -d e:f ^g (h) *").unwrap();
        assert!(syntax.words().all(|w| w.chars().all(char::is_alphanumeric)));
        assert!(SearchQuery::parse(&"a".repeat(256)).is_ok());
        let spaced = vec!["a"; 128].join(" ");
        assert_eq!(
            SearchQuery::parse(&spaced).unwrap().terms.len(),
            1,
            "deduplicated"
        );
    }
}
