package expo

// pow10 are the powers of ten that float64 holds exactly.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
	1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// fastDecimal reads the plain decimals nearly every sample value is ("0.0", "4.0", "0.83",
// "1.5e+09"): an optional sign, digits with an optional point, an optional exponent. It reports
// false for anything else (other spellings, or digits it cannot convert exactly), which
// strconv.ParseFloat then reads or refuses.
//
// The result is exact (Clinger's fast path): a mantissa of at most 2^53 and a power of ten of
// at most 10^22 are both exact float64 values, and one IEEE multiplication or division of two
// exact values is correctly rounded, which is what ParseFloat returns.
func fastDecimal(b []byte) (float64, bool) {
	i := 0
	neg := false
	if i < len(b) && (b[i] == '+' || b[i] == '-') {
		neg = b[i] == '-'
		i++
	}
	var mant uint64
	nd, digits, exp := 0, 0, 0 // significant digits kept, digits read, decimal exponent
	for ; i < len(b) && b[i]-'0' < 10; i++ {
		digits++
		if mant == 0 && b[i] == '0' {
			continue
		}
		if nd == 19 {
			return 0, false // would overflow mant
		}
		mant = mant*10 + uint64(b[i]-'0')
		nd++
	}
	if i < len(b) && b[i] == '.' {
		for i++; i < len(b) && b[i]-'0' < 10; i++ {
			digits++
			exp--
			if mant == 0 && b[i] == '0' {
				continue
			}
			if nd == 19 {
				return 0, false
			}
			mant = mant*10 + uint64(b[i]-'0')
			nd++
		}
	}
	if digits == 0 {
		return 0, false
	}
	if i < len(b) && b[i]|0x20 == 'e' {
		i++
		eneg := false
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			eneg = b[i] == '-'
			i++
		}
		e, ed := 0, 0
		for ; i < len(b) && b[i]-'0' < 10 && ed < 4; i++ {
			e = e*10 + int(b[i]-'0')
			ed++
		}
		if ed == 0 {
			return 0, false
		}
		if eneg {
			e = -e
		}
		exp += e
	}
	if i != len(b) || mant > 1<<53 {
		return 0, false // more exponent digits than four, another character, or a long mantissa
	}
	f := float64(mant)
	switch {
	case mant == 0 || exp == 0:
	case exp > 0 && exp <= 22:
		f *= pow10[exp]
	case exp < 0 && exp >= -22:
		f /= pow10[-exp]
	default:
		return 0, false
	}
	if neg {
		f = -f
	}
	return f, true
}
