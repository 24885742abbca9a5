package bolt

import (
	"context"
	"strings"

	"github.com/switchyard/switchyard/bot"
)

// FindDelivery returns what the delivery with the id made: its work item
// or its ingress record, the latest when the id was delivered again after
// the dedup window. An empty source looks at every source and refuses an id
// more than one used. Deliveries stored before the delivery index existed
// are found while their dedup key is kept (dedup_window).
func (s *Store) FindDelivery(ctx context.Context, source, deliveryID string) (bot.IngestResult, error) {
	if err := ctx.Err(); err != nil {
		return bot.IngestResult{}, err
	}
	if deliveryID == "" {
		return bot.IngestResult{}, bot.Errorf(bot.EINVALID, "find delivery: no delivery id")
	}
	sources := []string{source}
	if source == "" {
		sources = []string{bot.SourceGitHub, bot.SourceSlack, bot.SourceLocal, bot.SourceSchedule}
	}
	var res bot.IngestResult
	err := s.view("find delivery", func(t txn) error {
		var found []string
		for _, src := range sources {
			key := (&bot.Event{Source: src, DeliveryID: deliveryID}).DedupKey()
			id := t.bucket(bucketDeliveries).Get([]byte(key))
			if id == nil {
				if v := t.bucket(bucketDedup).Get([]byte(key)); len(v) > 8 {
					id = v[8:]
				}
			}
			if id == nil {
				continue
			}
			found = append(found, src)
			r, err := t.original(string(id))
			if err != nil {
				return err
			}
			r.Duplicate = false
			res = r
		}
		switch len(found) {
		case 0:
			where := "any source"
			if source != "" {
				where = source
			}
			return bot.Errorf(bot.ENOTFOUND, "no delivery %q from %s", deliveryID, where)
		case 1:
			return nil
		}
		return bot.Errorf(bot.EINVALID, "delivery %q came from %s: name the source", deliveryID, strings.Join(found, " and "))
	})
	return res, err
}
