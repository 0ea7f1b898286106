//! Exact integer arithmetic where a product outgrows `i128`: money is GPU-µs × cents per
//! GPU-hour (up to ~6 × 10²⁶ for a million GPUs over two years at the highest rate), and
//! sharing it in proportion to another GPU-µs figure multiplies two such numbers (~10⁴⁶).
//! [`mul_div_round`] keeps that product in 256 bits, so the share is exact.

/// `a × b ÷ den`, rounded half away from zero, exactly: the product is held in 256 bits.
/// Saturates at `i128::MIN`/`i128::MAX` where the quotient itself does not fit (a share never
/// does that: it is at most its whole).
///
/// # Panics
/// When `den` is 0.
pub fn mul_div_round(a: i128, b: i128, den: i128) -> i128 {
    assert!(den != 0, "a division by zero");
    let negative = (a < 0) ^ (b < 0) ^ (den < 0);
    let den = den.unsigned_abs();
    let (hi, lo) = mul_wide(a.unsigned_abs(), b.unsigned_abs());
    // Half the divisor added rounds half away from zero (the magnitude rounds up at .5).
    let (lo, carry) = lo.overflowing_add(den / 2);
    let hi = hi + u128::from(carry);
    let magnitude = if hi >= den {
        u128::MAX
    } else {
        div_wide(hi, lo, den)
    };
    match (negative, i128::try_from(magnitude)) {
        (false, Ok(q)) => q,
        (true, Ok(q)) => -q,
        (false, Err(_)) => i128::MAX,
        (true, Err(_)) => i128::MIN,
    }
}

/// `a × b` as 256 bits: (high 128, low 128), from four 64 × 64-bit products.
fn mul_wide(a: u128, b: u128) -> (u128, u128) {
    const LOW: u128 = u64::MAX as u128;
    let (a1, a0) = (a >> 64, a & LOW);
    let (b1, b0) = (b >> 64, b & LOW);
    let (p00, p01, p10, p11) = (a0 * b0, a0 * b1, a1 * b0, a1 * b1);
    // The middle 64-bit column with what carries into it: under 3 × 2⁶⁴, no overflow.
    let middle = (p00 >> 64) + (p01 & LOW) + (p10 & LOW);
    let lo = (p00 & LOW) | (middle << 64);
    let hi = p11 + (p01 >> 64) + (p10 >> 64) + (middle >> 64);
    (hi, lo)
}

/// (hi, lo) ÷ `den`, truncated, for `hi < den` (so the quotient fits 128 bits): long division,
/// a bit at a time.
fn div_wide(hi: u128, lo: u128, den: u128) -> u128 {
    let (mut rem, mut quotient) = (hi, 0u128);
    for bit in (0..128).rev() {
        // rem × 2 + the next bit, which may pass 2¹²⁸: then it is certainly ≥ den.
        let carried = rem >> 127 == 1;
        rem = (rem << 1) | ((lo >> bit) & 1);
        quotient <<= 1;
        if carried || rem >= den {
            rem = rem.wrapping_sub(den);
            quotient |= 1;
        }
    }
    quotient
}

#[cfg(test)]
mod tests {
    use num_bigint::BigInt;
    use proptest::prelude::*;

    use super::*;

    /// The same by arbitrary-precision arithmetic (num-bigint): round half away from zero.
    fn reference(a: i128, b: i128, den: i128) -> BigInt {
        let (product, den) = (BigInt::from(a) * BigInt::from(b), BigInt::from(den));
        let negative = (product < BigInt::from(0)) != (den < BigInt::from(0));
        let (p, d) = (product.magnitude().clone(), den.magnitude().clone());
        let q = BigInt::from((p + &d / 2u32) / d);
        if negative { -q } else { q }
    }

    #[test]
    fn by_hand() {
        assert_eq!(mul_div_round(7, 3, 2), 11, "10.5 rounds up");
        assert_eq!(mul_div_round(-7, 3, 2), -11, "−10.5 rounds away from zero");
        assert_eq!(mul_div_round(7, -3, -2), 11);
        assert_eq!(mul_div_round(5, 1, 3), 2, "1.67");
        assert_eq!(mul_div_round(4, 1, 3), 1, "1.33");
        // 2¹²⁷ − 1 squared over itself: the product needs 254 bits.
        assert_eq!(mul_div_round(i128::MAX, i128::MAX, i128::MAX), i128::MAX);
        // A million GPUs for 731 days at 10,000,000 cents an hour, shared 1 : 2.
        let gpu_us = 1_000_000_i128 * 731 * 86_400_000_000;
        let pool = gpu_us * 10_000_000;
        assert_eq!(mul_div_round(pool, gpu_us, 3 * gpu_us), pool / 3);
        assert_eq!(mul_div_round(i128::MAX, 2, 1), i128::MAX, "saturates");
        assert_eq!(mul_div_round(i128::MAX, -2, 1), i128::MIN, "saturates");
    }

    proptest! {
        #[test]
        fn exact_as_arbitrary_precision(
            a in any::<i128>(),
            b in any::<i128>(),
            den in any::<i128>().prop_filter("not zero", |d| *d != 0),
        ) {
            let exact = reference(a, b, den);
            let expected = exact.clone().max(BigInt::from(i128::MIN)).min(BigInt::from(i128::MAX));
            prop_assert_eq!(BigInt::from(mul_div_round(a, b, den)), expected, "{}", exact);
        }

        /// Shares of a pool the size money reaches, by weights the size GPU-µs reach.
        #[test]
        fn exact_at_the_sizes_money_reaches(
            pool in 0i128..=1_000_000 * 731 * 86_400_000_000 * 10_000_000,
            weight in 0i128..=1_000_000 * 731 * 86_400_000_000,
            extra in 1i128..=1_000_000 * 731 * 86_400_000_000,
        ) {
            let total = weight + extra;
            prop_assert_eq!(BigInt::from(mul_div_round(pool, weight, total)), reference(pool, weight, total));
        }
    }
}
