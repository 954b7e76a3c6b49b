//! One copy of each distinct process name, exec filename and argv while a
//! model is built: a fork storm names the same few a million times. The
//! sets live only as long as the builder; what they hold is bounded by the
//! log (each distinct text once, as the model would otherwise store it).
//! The analysis shares folded deaths' signatures through one too.
use std::{collections::HashSet, sync::Arc};

#[derive(Debug, Clone, Default)]
pub(crate) struct Interner {
    texts: HashSet<Arc<str>>,
    argvs: HashSet<Arc<[String]>>,
}

impl Interner {
    pub(crate) fn text(&mut self, s: &str) -> Arc<str> {
        if let Some(a) = self.texts.get(s) {
            return a.clone();
        }
        let a: Arc<str> = Arc::from(s);
        self.texts.insert(a.clone());
        a
    }

    pub(super) fn argv(&mut self, argv: &[String]) -> Arc<[String]> {
        if let Some(a) = self.argvs.get(argv) {
            return a.clone();
        }
        let a: Arc<[String]> = Arc::from(argv);
        self.argvs.insert(a.clone());
        a
    }
}
