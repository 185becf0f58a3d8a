//! A comparison of a number with a bound, as a Prometheus check's `expect`
//! writes it: `< 0.05`, `>= 1`, `== 0`, `!= 0`.

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Op {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

impl Op {
    fn text(self) -> &'static str {
        match self {
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::Eq => "==",
            Op::Ne => "!=",
        }
    }
}

/// `value OP bound` holds or not.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Comparison {
    pub op: Op,
    pub bound: f64,
}

/// Text that is not a comparison.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "\"{0}\" is not a comparison: write an operator (<, <=, >, >=, ==, !=) and a number, e.g. \"< 0.05\""
)]
pub struct NotAComparison(pub String);

impl std::str::FromStr for Comparison {
    type Err = NotAComparison;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let t = text.trim();
        // Two-character operators first: "<=" is not "<" then "=1".
        let ops = [
            ("<=", Op::Le),
            (">=", Op::Ge),
            ("==", Op::Eq),
            ("!=", Op::Ne),
            ("<", Op::Lt),
            (">", Op::Gt),
        ];
        let (op, rest) = ops
            .iter()
            .find_map(|(s, op)| t.strip_prefix(s).map(|rest| (*op, rest)))
            .ok_or_else(|| NotAComparison(text.to_string()))?;
        let bound: f64 = rest
            .trim()
            .parse()
            .map_err(|_| NotAComparison(text.to_string()))?;
        if !bound.is_finite() {
            return Err(NotAComparison(text.to_string()));
        }
        Ok(Comparison { op, bound })
    }
}

impl Comparison {
    /// Whether `value` meets the comparison. NaN meets none but `!=`.
    pub fn holds(&self, value: f64) -> bool {
        match self.op {
            Op::Lt => value < self.bound,
            Op::Le => value <= self.bound,
            Op::Gt => value > self.bound,
            Op::Ge => value >= self.bound,
            Op::Eq => value == self.bound,
            Op::Ne => value != self.bound,
        }
    }
}

impl fmt::Display for Comparison {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.op.text(), self.bound)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comparisons_read_and_judge() {
        let c: Comparison = "< 0.05".parse().unwrap();
        assert!(c.holds(0.01) && !c.holds(0.05) && !c.holds(f64::NAN));
        let c: Comparison = ">=1".parse().unwrap();
        assert!(c.holds(1.0) && !c.holds(0.5));
        let c: Comparison = "!= 0".parse().unwrap();
        assert!(c.holds(f64::NAN) && !c.holds(0.0));
        assert_eq!(c.to_string(), "!= 0");
        for bad in ["", "0.5", "=< 1", "< x", "< inf", "<"] {
            let e = bad.parse::<Comparison>().unwrap_err().to_string();
            assert!(e.contains("is not a comparison"), "{bad}: {e}");
        }
    }
}
