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

// window is how many days of recent spend the forecast's rate reads.
const window = 7

// Project forecasts the month [start, end) at now from days, its spend by
// UTC day from start (days after now are not read): spend so far plus the
// recent daily rate (the last seven days, today's part counted as the part
// of the day gone) over the rest of the month. Days spend alike or not:
// the 95% interval is 1.96 standard deviations of a complete day's spend,
// scaled by the square root of the days left (sums of days that vary
// independently).
func Project(days []float64, start, end, now time.Time) Projection {
	total := end.Sub(start).Hours() / 24
	e := min(max(now.Sub(start).Hours()/24, 0), total)
	p := Projection{Elapsed: e}
	today := min(int(e), len(days)-1)
	for i := 0; i <= today && i < len(days); i++ {
		p.Spend += days[i]
	}
	if e < 1.0/24 || today < 0 {
		p.Forecast, p.Note = p.Spend, "less than an hour of the month has gone: no forecast yet"
		return p
	}
	first := max(today-(window-1), 0)
	var recent float64
	for i := first; i <= today; i++ {
		recent += days[i]
	}
	span := float64(today-first) + (e - float64(today))
	if span <= 0 {
		span = e
	}
	rate := recent / span
	left := total - e
	p.Forecast = p.Spend + rate*left
	complete := days[:today]
	if len(complete) < 3 {
		p.Note = fmt.Sprintf("%d complete days of the month: the forecast runs the recent rate on, with no interval yet", len(complete))
		p.Low, p.High = p.Forecast, p.Forecast
		return p
	}
	var mean, sq float64
	for _, d := range complete {
		mean += d
	}
	mean /= float64(len(complete))
	for _, d := range complete {
		sq += (d - mean) * (d - mean)
	}
	sd := math.Sqrt(sq / float64(len(complete)-1))
	half := 1.96 * sd * math.Sqrt(left)
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
