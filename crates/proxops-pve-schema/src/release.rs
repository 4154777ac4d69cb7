//! The PVE releases the table holds ([`PveRelease`]) and the set of them a definition holds for
//! ([`Versions`]).

/// A PVE release whose official API schema the table was generated from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PveRelease {
    /// PVE 8.4 (schema 8.4.2).
    V8_4,
    /// PVE 9.1 (schema 9.1.3).
    V9_1,
}

impl PveRelease {
    /// Every release the table knows, oldest first.
    pub const ALL: [PveRelease; 2] = [PveRelease::V8_4, PveRelease::V9_1];

    /// The release whose schema applies to a cluster running `major.minor`: the newest one
    /// not newer than it (8.x before 8.4 is checked as 8.4, the oldest known), `None` for a
    /// release older than PVE 8.
    pub fn for_release(major: u32, minor: u32) -> Option<PveRelease> {
        match (major, minor) {
            (0..=7, _) => None,
            (8, _) | (9, 0) => Some(PveRelease::V8_4),
            _ => Some(PveRelease::V9_1),
        }
    }

    /// `8.4` or `9.1`.
    pub fn as_str(self) -> &'static str {
        match self {
            PveRelease::V8_4 => "8.4",
            PveRelease::V9_1 => "9.1",
        }
    }

    const fn bit(self) -> u8 {
        match self {
            PveRelease::V8_4 => 1,
            PveRelease::V9_1 => 2,
        }
    }
}

/// The releases a definition holds for (a bit per [`PveRelease`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Versions(u8);

impl Versions {
    /// PVE 8.4 only.
    pub const V8_4: Versions = Versions(PveRelease::V8_4.bit());
    /// PVE 9.1 only.
    pub const V9_1: Versions = Versions(PveRelease::V9_1.bit());
    /// Every release.
    pub const ALL: Versions = Versions(PveRelease::V8_4.bit() | PveRelease::V9_1.bit());

    /// Whether the definition holds for `release`.
    pub const fn contains(self, release: PveRelease) -> bool {
        self.0 & release.bit() != 0
    }

    /// The releases, oldest first.
    pub fn releases(self) -> impl Iterator<Item = PveRelease> {
        PveRelease::ALL
            .into_iter()
            .filter(move |r| self.contains(*r))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_is_checked_against_the_newest_release_not_newer_than_it() {
        assert_eq!(PveRelease::for_release(7, 4), None);
        assert_eq!(PveRelease::for_release(8, 1), Some(PveRelease::V8_4));
        assert_eq!(PveRelease::for_release(9, 0), Some(PveRelease::V8_4));
        assert_eq!(PveRelease::for_release(9, 1), Some(PveRelease::V9_1));
        assert_eq!(PveRelease::for_release(10, 0), Some(PveRelease::V9_1));
    }

    #[test]
    fn versions_hold_for_the_releases_they_name() {
        assert!(Versions::ALL.contains(PveRelease::V8_4));
        assert!(!Versions::V9_1.contains(PveRelease::V8_4));
        assert_eq!(
            Versions::V8_4.releases().collect::<Vec<_>>(),
            [PveRelease::V8_4]
        );
        assert_eq!(Versions::ALL.releases().count(), 2);
    }
}
