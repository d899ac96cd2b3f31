//! `Shared<T>`: an immutable value shared by every copy of a process state, compared and
//! hashed by identity.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::Arc;

/// An `Arc` whose equality and hash are the pointer's: cheap to clone, compare and hash,
/// which matters when the explorer hashes millions of states that all point at the same
/// lock description or program text. Two `Shared` built separately from equal values are
/// *not* equal: build each shared description once and clone the handle.
pub struct Shared<T: ?Sized>(Arc<T>);

impl<T> Shared<T> {
    /// Shares `value`.
    pub fn new(value: T) -> Shared<T> {
        Shared(Arc::new(value))
    }
}

impl<T: Clone> Shared<T> {
    /// Mutable access, cloning the value first only if another handle shares it (as
    /// `Arc::make_mut`). Meant for setting a value up before it is shared.
    pub fn make_mut(&mut self) -> &mut T {
        Arc::make_mut(&mut self.0)
    }
}

impl<T: ?Sized> From<Arc<T>> for Shared<T> {
    fn from(arc: Arc<T>) -> Self {
        Shared(arc)
    }
}

impl<T: ?Sized> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Shared(Arc::clone(&self.0))
    }
}

impl<T: ?Sized> PartialEq for Shared<T> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl<T: ?Sized> Eq for Shared<T> {}

impl<T: ?Sized> Hash for Shared<T> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (Arc::as_ptr(&self.0) as *const () as usize).hash(state);
    }
}

impl<T: ?Sized> Deref for Shared<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for Shared<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}
