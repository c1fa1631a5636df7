package budget

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// Projection is a month's spend so far and its forecast at month end, in
// dollars. Low and High bound the forecast at 95% when the month has
// enough complete days to tell how much a day varies (Interval).
type Projection struct {
	Spend, Forecast, Low, High float64
	Interval                   bool
	// Elapsed is how much of the month has gone, in days.
	Elapsed float64
	// Note says when there is too little history to trust the forecast.
	Note string
}

// window is how far back the forecast's rate reads.
const window = 7 * 24 * time.Hour

// Project forecasts the month [start, end) at now from hours, its spend
// by UTC hour from start (hours after now are not read): spend so far
// plus the recent rate (the last seven days since the first hour that
// spent, the current hour counted as the part of it gone) over the rest
// of the month. The hours before the first that spent are no history (a
// project made mid-month). The 95% interval is 1.96 standard deviations
// of a day's spend (24-hour windows back from now, after the first hour
// that spent), scaled by the square root of the days left: sums of days
// that vary independently. With fewer than three such days there is no
// interval, and Note says so.
func Project(hours []float64, start, end, now time.Time) Projection {
	total := end.Sub(start).Hours()
	e := min(max(now.Sub(start).Hours(), 0), total)
	p := Projection{Elapsed: e / 24}
	cur := min(int(e), len(hours)-1) // the current hour
	for i := 0; i <= cur; i++ {
		p.Spend += hours[i]
	}
	if e < 1 || cur < 0 {
		p.Forecast, p.Note = p.Spend, "less than an hour of the month has gone: no forecast yet"
		return p
	}
	first := 0
	for first <= cur && hours[first] == 0 {
		first++
	}
	if first > cur {
		p.Forecast, p.Note = p.Spend, "nothing spent this month yet: no forecast"
		return p
	}
	from := max(first, cur-int(window/time.Hour)+1)
	var recent float64
	for i := from; i <= cur; i++ {
		recent += hours[i]
	}
	span := float64(cur-from) + (e - float64(cur)) // hours, the current one in part
	left := total - e
	p.Forecast = p.Spend + recent/span*left
	var daily []float64
	for d := cur; d-24 >= first; d -= 24 { // the 24 complete hours before d
		var sum float64
		for _, h := range hours[d-24 : d] {
			sum += h
		}
		daily = append(daily, sum)
	}
	if len(daily) < 3 {
		p.Note = fmt.Sprintf("%d days of spend this month: the forecast runs the recent rate on, with no interval yet", len(daily))
		p.Low, p.High = p.Forecast, p.Forecast
		return p
	}
	var mean, sq float64
	for _, d := range daily {
		mean += d
	}
	mean /= float64(len(daily))
	for _, d := range daily {
		sq += (d - mean) * (d - mean)
	}
	sd := math.Sqrt(sq / float64(len(daily)-1))
	half := 1.96 * sd * math.Sqrt(left/24)
	p.Interval, p.Low, p.High = true, max(p.Spend, p.Forecast-half), p.Forecast+half
	return p
}

// Due are the alerts budget b raises at now that are not in fired (by
// key): a threshold of spend crossed, the forecast at or above the budget
// (once a day of the month has gone, so an hour's noise does not), a day
// whose spend is above the mean of the seven before by more than the
// budget's ChangePercent. recent is the spend of the nine UTC days up to
// now's (now's last, partial).
func Due(b domain.Budget, p Projection, recent []float64, now time.Time, fired map[string]bool) []domain.BudgetAlert {
	amount, err := strconv.ParseFloat(b.Amount, 64)
	if err != nil || amount <= 0 {
		return nil
	}
	month := now.UTC().Format("2006-01")
	alert := func(kind, key string, threshold int, msg string) domain.BudgetAlert {
		return domain.BudgetAlert{BudgetID: b.ID, ProjectID: b.ProjectID, Name: b.Name, Kind: kind, Threshold: threshold,
			Key: key, Month: month, At: now, Spend: dollars(p.Spend), Forecast: dollars(p.Forecast), Message: msg}
	}
	var out []domain.BudgetAlert
	for _, t := range b.Thresholds {
		key := "spend:" + strconv.Itoa(t)
		if !fired[key] && p.Spend >= amount*float64(t)/100 {
			out = append(out, alert(domain.AlertSpend, key, t, fmt.Sprintf("budget %s: $%s spent this month, %d%% of $%s",
				b.Name, dollars(p.Spend), t, b.Amount)))
		}
	}
	if !fired["forecast"] && p.Elapsed >= 1 && p.Forecast >= amount {
		out = append(out, alert(domain.AlertForecast, "forecast", 100, fmt.Sprintf("budget %s: the month is forecast to end at $%s, over $%s",
			b.Name, dollars(p.Forecast), b.Amount)))
	}
	if b.ChangePercent > 0 && len(recent) == 9 {
		var base float64
		for _, d := range recent[:7] {
			base += d
		}
		base /= 7
		day := now.UTC().Truncate(24*time.Hour).AddDate(0, 0, -1).Format("2006-01-02")
		key := "change:" + day
		if y := recent[7]; !fired[key] && base > 0 && y > base*(1+float64(b.ChangePercent)/100) {
			out = append(out, alert(domain.AlertChange, key, b.ChangePercent, fmt.Sprintf(
				"budget %s: $%s spent on %s, %.0f%% above the mean of the seven days before ($%s)", b.Name, dollars(y), day,
				(y/base-1)*100, dollars(base))))
		}
	}
	return out
}

func dollars(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
