//! When an entry is durable: once a majority of the configuration's members hold it on
//! disk ([`durable_index`]), and the deliberately wrong variants the campaign must catch
//! ([`Mutation`], the `mutations` feature, for tests only).

/// Deliberately wrong variants of the durable point (the `mutations` feature).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Mutation {
    /// As it is.
    #[default]
    None,
    /// The writer moves its durable point when it hands a batch out, before the batch's
    /// syncs ran: durability acknowledged before the disks hold it.
    #[cfg(feature = "mutations")]
    DurableAtHandout,
    /// An entry counts as durable once one member's disk holds it, not a majority's.
    #[cfg(feature = "mutations")]
    DurableOnOne,
}

impl Mutation {
    /// Every variant but `None`.
    #[cfg(feature = "mutations")]
    pub const ALL: &'static [Mutation] = &[Mutation::DurableAtHandout, Mutation::DurableOnOne];
    /// Every variant but `None`: none without the `mutations` feature.
    #[cfg(not(feature = "mutations"))]
    pub const ALL: &'static [Mutation] = &[];

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Mutation::None => "none",
            #[cfg(feature = "mutations")]
            Mutation::DurableAtHandout => "durable-at-handout",
            #[cfg(feature = "mutations")]
            Mutation::DurableOnOne => "durable-on-one",
        }
    }

    /// The variant named `name`, if built.
    pub fn from_name(name: &str) -> Option<Mutation> {
        if let Some(&m) = Mutation::ALL.iter().find(|m| m.name() == name) {
            return Some(m);
        }
        (name == "none").then_some(Mutation::None)
    }
}

/// The durable index of `points`, each member's durable point (every slot below it on
/// that member's disk): every slot below the result is on the disks of `majority` of
/// them — the `majority`-th highest point.
///
/// # Panics
/// If fewer than `majority` points are given, or `majority` is 0.
pub fn durable_index(points: &[u64], majority: usize) -> u64 {
    durable_index_with(points, majority, Mutation::None)
}

/// [`durable_index`] as `mutation` computes it.
pub fn durable_index_with(points: &[u64], majority: usize, mutation: Mutation) -> u64 {
    assert!(
        majority > 0 && points.len() >= majority,
        "{majority} of {} points",
        points.len()
    );
    let mut sorted = points.to_vec();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    let index = match mutation {
        #[cfg(feature = "mutations")]
        Mutation::DurableOnOne => sorted[0],
        _ => sorted[majority - 1],
    };
    // Postcondition: `majority` points reach it.
    debug_assert!(
        mutation != Mutation::None || points.iter().filter(|&&p| p >= index).count() >= majority
    );
    index
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_durable_index_is_the_majority_th_highest_point() {
        assert_eq!(durable_index(&[5, 9, 7], 2), 7);
        assert_eq!(durable_index(&[5, 9, 7, 1, 3], 3), 5);
        assert_eq!(durable_index(&[4, 4, 4], 2), 4);
    }
}
