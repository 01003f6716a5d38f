//! Downstream pagination of the merged lists. A cursor names its list and an
//! offset (`tools:500`); anything else, or an offset past the end, is not a
//! cursor the gateway gave out and is refused with -32602.

use rmcp::ErrorData;

/// Items per page: large enough that a typical gateway lists everything in
/// one page (some clients never ask for a second), small enough to bound one
/// response.
pub const PAGE_SIZE: usize = 500;

/// The page of `items` that `cursor` points at (the first without one), and
/// the cursor of the next page, if any.
pub fn page<T: Clone>(
    list: &str,
    items: &[T],
    cursor: Option<&str>,
) -> Result<(Vec<T>, Option<String>), ErrorData> {
    let start = match cursor {
        None => 0,
        Some(cursor) => offset(list, cursor, items.len()).ok_or_else(|| {
            ErrorData::invalid_params(format!("invalid cursor for {list}/list"), None)
        })?,
    };
    let end = (start + PAGE_SIZE).min(items.len());
    let next = (end < items.len()).then(|| format!("{list}:{end}"));
    Ok((items[start..end].to_vec(), next))
}

fn offset(list: &str, cursor: &str, len: usize) -> Option<usize> {
    let (named, offset) = cursor.split_once(':')?;
    let offset: usize = offset.parse().ok()?;
    // A cursor of a list that shrank since still ends the listing cleanly.
    (named == list && offset > 0 && offset <= len.max(PAGE_SIZE)).then_some(offset.min(len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_follow_each_other_to_the_end() {
        let items: Vec<usize> = (0..PAGE_SIZE * 2 + 3).collect();
        let (first, next) = page("tools", &items, None).unwrap();
        assert_eq!(
            (first.len(), next.as_deref()),
            (PAGE_SIZE, Some("tools:500"))
        );
        let (second, next) = page("tools", &items, next.as_deref()).unwrap();
        assert_eq!(second[0], PAGE_SIZE);
        let (last, next) = page("tools", &items, next.as_deref()).unwrap();
        assert_eq!((last.len(), next), (3, None));
    }

    #[test]
    fn one_page_has_no_cursor() {
        let (all, next) = page("prompts", &[1, 2, 3], None).unwrap();
        assert_eq!((all, next), (vec![1, 2, 3], None));
    }

    #[test]
    fn bogus_cursors_are_invalid_params() {
        let items: Vec<usize> = (0..10).collect();
        for bogus in [
            "",
            "nope",
            "tools:x",
            "prompts:5",
            "tools:0",
            "tools:-1",
            "tools:99999",
        ] {
            let error = page("tools", &items, Some(bogus)).unwrap_err();
            assert_eq!(
                error.code,
                rmcp::model::ErrorCode::INVALID_PARAMS,
                "{bogus}"
            );
        }
    }
}
