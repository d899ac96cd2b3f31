//! The bulk local copies (`Op::LoadWords`, `Op::StoreWords`) as both real backends run
//! them on their node's words: every word checked before any is touched (the last bounds
//! them all: a node's words are one range), then each read or written as a `SeqCst`
//! access, in address order.

use crate::error::RdmaError;
use crate::ids::Loc;
use crate::op::Reply;
use crate::words::Words;
use std::sync::atomic::{AtomicU64, Ordering};

/// `count` words from `loc` on, through `word` (the backend's checked access to its
/// node's words), as [`Reply::Words`].
pub(crate) fn load_words<'a>(
    word: impl Fn(Loc) -> Result<&'a AtomicU64, RdmaError>,
    loc: Loc,
    count: u32,
) -> Result<Reply, RdmaError> {
    if count == 0 {
        return Err(RdmaError::no_words("LoadWords"));
    }
    word(loc.word_after(count as usize - 1))?;
    let words = (0..count as usize)
        .map(|i| Ok(word(loc.word_after(i))?.load(Ordering::SeqCst)))
        .collect::<Result<Vec<u64>, RdmaError>>()?;
    assert_eq!(words.len(), count as usize);
    Ok(Reply::Words(words.into()))
}

/// Writes `words` from `loc` on, through `word`; nothing if a word is out of reach.
pub(crate) fn store_words<'a>(
    word: impl Fn(Loc) -> Result<&'a AtomicU64, RdmaError>,
    loc: Loc,
    words: &Words,
) -> Result<Reply, RdmaError> {
    word(loc.word_after(words.len().saturating_sub(1)))?;
    for (i, &value) in words.as_slice().iter().enumerate() {
        word(loc.word_after(i))?.store(value, Ordering::SeqCst);
    }
    Ok(Reply::Done)
}
