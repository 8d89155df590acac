package jobs

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/inputformat"
)

// WritePlan prints a plan: one line per partition (position, end, lag,
// tasks) and one per split.
func WritePlan(w io.Writer, p *inputformat.Plan) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tLOG START\tCHECKPOINT\tSTART\tEND\tLAG\tTASKS\tNOTE")
	count := map[string]int{}
	for _, s := range p.Splits {
		count[tpKey(s.Topic, s.Partition)]++
	}
	for _, pp := range p.Partitions {
		cp := "-"
		if pp.CheckpointKnown {
			cp = fmt.Sprint(pp.Checkpoint)
		}
		note := ""
		if pp.Origin {
			note = "never loaded: starts at " + policyText(pp)
		}
		if pp.Skipped != nil {
			note = fmt.Sprintf("skips [%d, %d): deleted before loading", pp.Skipped.Start, pp.Skipped.End)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%d\t%d\t%d\t%d\t%s\n", pp.Topic, pp.Partition, pp.LogStart, cp, pp.Start, pp.End, pp.Lag(),
			count[tpKey(pp.Topic, pp.Partition)], note)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	writeTopicNotes(w, p.Topics)
	fmt.Fprintf(w, "\n%d splits, %d offsets:\n", len(p.Splits), p.Records())
	for _, s := range p.Splits {
		fmt.Fprintf(w, "  %s\n", s)
	}
	return nil
}

// WriteText prints a run report for people.
func (r *RunReport) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "run %s of job %s: %s in %s\n", r.ID, r.Job, r.Status, time.Duration(r.Duration).Round(time.Millisecond))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tFROM\tTO\tRECORDS IN\tBYTES IN\tROWS OUT\tBYTES OUT\tFILES\tFILTERED\tSKIPPED\tDEAD-LETTERED\tNOTE")
	for _, p := range r.Partitions {
		note := ""
		if p.LostToRetention != nil {
			note = fmt.Sprintf("LOST [%d, %d) to retention (on_offset_out_of_range: skip)", p.LostToRetention.Start, p.LostToRetention.End)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", p.Topic, p.Partition, p.From, p.To,
			p.RecordsIn, p.BytesIn, p.RowsOut, p.BytesOut, p.Files, p.Filtered, p.Skipped, p.DeadLettered, note)
	}
	t := r.Totals
	fmt.Fprintf(tw, "total\t\t\t\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", t.RecordsIn, t.BytesIn, t.RowsOut, t.BytesOut, t.Files, t.Filtered, t.Skipped, t.DeadLettered)
	if err := tw.Flush(); err != nil {
		return err
	}
	writeTopicNotes(w, r.Topics)
	fmt.Fprintf(w, "%d tasks committed", t.Tasks)
	if t.TakenByOthers > 0 {
		fmt.Fprintf(w, ", %d splits committed by another run (not counted here)", t.TakenByOthers)
	}
	if t.Failed > 0 {
		fmt.Fprintf(w, ", %d tasks failed (nothing of them committed)", t.Failed)
	}
	fmt.Fprintf(w, "; %.0f records/s, %.1f MB/s of input; report %s/%s.json\n", r.RecordsPerSecond, r.InputMBPerSecond, RunsDir, r.ID)
	for _, e := range r.Errors {
		fmt.Fprintf(w, "error: %s\n", e)
	}
	return nil
}

func timeText(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func offsetText(n int64) string {
	if n < 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

// WriteCheckpoints prints one line per partition.
func WriteCheckpoints(w io.Writer, cps []PartitionCheckpoint) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tCHECKPOINT\tCOMMITS\tRECORDS\tCOMMITTED\tLAST RECORD\tEND\tLAG\tID")
	for _, c := range cps {
		id := c.ID
		if id == "" {
			id = "(never loaded)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", c.Topic, c.Partition, offsetText(c.Offset), c.Commits, c.Records,
			timeText(c.Committed), timeText(c.LastRecord), offsetText(c.End), offsetText(c.Lag), id)
	}
	return tw.Flush()
}

// WriteText prints a checkpoint for people.
func (d *CheckpointDetail) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "checkpoint %s\n", d.ID)
	for _, p := range d.Positions {
		fmt.Fprintf(w, "  %s/%d at offset %d\n", p.Topic, p.Partition, p.Offset)
	}
	if d.Run != nil {
		fmt.Fprintf(w, "where run %s (%s, started %s) left the job\n", d.Run.ID, d.Run.Status, timeText(d.Run.Started))
	}
	if m := d.Commit; m != nil {
		fmt.Fprintf(w, "made by the commit of [%d, %d): %d records, attempt %s, committed %s\n", m.Start, m.End, m.Records, m.Attempt, timeText(m.Committed))
		for _, f := range m.Files {
			fmt.Fprintf(w, "  %s  %d records, %d bytes, offsets %d..%d\n", f.Final, f.Records, f.Bytes, f.First, f.Last)
		}
		if d.DeadLetters != "" {
			fmt.Fprintf(w, "dead letters: %s\n", d.DeadLetters)
		}
	}
	_, err := fmt.Fprintf(w, "after it: %d commits, %d records (a replay from here withdraws them)\n", d.Later, d.LaterRecords)
	return err
}

// WriteText prints a replay for people.
func (r *ReplayReport) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "replay from checkpoint %s\n", r.Checkpoint)
	for _, x := range r.Withdrawn {
		fmt.Fprintf(w, "withdrew %s/%d from %d: %d commits, %d records, %d files moved to %s\n", x.Topic, x.Partition, x.From,
			x.Commits, x.Records, len(x.Files), x.MovedTo)
	}
	if r.Run != nil {
		return r.Run.WriteText(w)
	}
	return nil
}

func policyText(pp inputformat.PartitionPlan) string {
	switch {
	case pp.New:
		return "its log start (added after the job's first run)"
	case pp.Start == pp.End && pp.Start != pp.LogStart:
		return "the log end (start: latest)"
	}
	return "its log start"
}

// writeTopicNotes prints what planning found of the topics' identities.
func writeTopicNotes(w io.Writer, topics []inputformat.TopicPlan) {
	for _, tp := range topics {
		if tp.Recreated != "" {
			verb := "NOT loaded"
			if tp.Restart {
				verb = fmt.Sprintf("started over from its first offsets as incarnation %d (on_topic_recreated: restart); the old topic's checkpoints moved to %s/%s/%06d", tp.Incarnation, retiredDir, tp.Topic, tp.Incarnation-1)
			}
			fmt.Fprintf(w, "topic %s was RECREATED (%s): %s\n", tp.Topic, tp.Recreated, verb)
		}
		if len(tp.NewPartitions) > 0 {
			fmt.Fprintf(w, "topic %s: partitions %v were added since the job's first run: they load from their log start\n", tp.Topic, tp.NewPartitions)
		}
	}
}
