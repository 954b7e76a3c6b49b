//! What the analysis produces. These types are serialized as-is into
//! report.json: a field's doc comment is its description in
//! docs/report.schema.json (derived, report/schema_tests.rs), and every
//! field is named in docs/report.md.
//!
//! One file per idea: who (process), why (cause), the OOM kill (oom), what
//! it left behind (remains), the certificate and its cascade link
//! (certificate), and folded deaths (group).
mod cause;
mod certificate;
mod group;
mod oom;
mod process;
mod remains;

pub use cause::*;
pub use certificate::*;
pub use group::*;
pub use oom::*;
pub use process::*;
pub use remains::*;

/// The snake_case name serde gives each variant, as `&'static str` (metric
/// labels, OTLP attributes, HTML): `Rank::Unexpected.as_str() == "unexpected"`.
macro_rules! as_str {
    ($($t:ty),*) => {$(
        impl $t {
            pub fn as_str(self) -> &'static str {
                self.into()
            }
        }
    )*};
}
as_str!(Rank, CauseKind, Relation, MechanismKind);

#[cfg(test)]
pub(crate) mod names {
    use strum::VariantArray;

    use super::*;

    /// One name per variant: what serde writes is what as_str says.
    pub(crate) fn same<T: VariantArray + serde::Serialize + Copy>(as_str: fn(T) -> &'static str) {
        for &v in T::VARIANTS {
            let serde = serde_json::to_value(v).unwrap();
            assert_eq!(serde.as_str(), Some(as_str(v)));
        }
    }

    #[test]
    fn as_str_is_the_serde_name() {
        same(Rank::as_str);
        same(CauseKind::as_str);
        same(Relation::as_str);
        same(MechanismKind::as_str);
    }
}
