package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"

	"github.com/go-zookeeper/zk"

	"github.com/sluicehq/sluice/broker/metadata"
)

// brokerConfigsPath holds the brokers' dynamic configs, as Kafka's
// /config/brokers/<id> (same JSON as a topic's overrides).
const brokerConfigsPath = "/config/brokers"

func brokerConfigPath(id int32) string { return brokerConfigsPath + "/" + strconv.Itoa(int(id)) }

// BrokerConfig returns this broker's dynamic configs
// (/config/brokers/<id>): empty when none were set.
func (n *Node) BrokerConfig() (map[string]string, error) {
	s, err := n.session()
	if err != nil {
		return nil, storeErr("%v", err)
	}
	data, _, err := s.ZK().Get(s.Path(brokerConfigPath(n.ID())))
	if isNoNode(err) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, storeErr("read %s: %v", brokerConfigPath(n.ID()), err)
	}
	var z configZNode
	if err := json.Unmarshal(data, &z); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", metadata.ErrCorrupt, brokerConfigPath(n.ID()), err)
	}
	if z.Config == nil {
		z.Config = map[string]string{}
	}
	return z.Config, nil
}

// UpdateBrokerConfig changes this broker's dynamic configs: each key of set
// is set, or deleted when its value is nil. The write is conditional on the
// version read (retried on a race). It returns the configs written.
func (n *Node) UpdateBrokerConfig(set map[string]*string) (map[string]string, error) {
	s, err := n.session()
	if err != nil {
		return nil, storeErr("%v", err)
	}
	if err := s.Ensure(brokerConfigsPath); err != nil {
		return nil, storeErr("%s: %v", brokerConfigsPath, err)
	}
	p := s.Path(brokerConfigPath(n.ID()))
	for try := 0; try < maxCASRetries; try++ {
		data, stat, err := s.ZK().Get(p)
		exists := err == nil
		if err != nil && !isNoNode(err) {
			return nil, storeErr("read %s: %v", brokerConfigPath(n.ID()), err)
		}
		var z configZNode
		if exists {
			if err := json.Unmarshal(data, &z); err != nil {
				return nil, fmt.Errorf("%w: %s: %v", metadata.ErrCorrupt, brokerConfigPath(n.ID()), err)
			}
		}
		cfg := maps.Clone(z.Config)
		if cfg == nil {
			cfg = map[string]string{}
		}
		for k, v := range set {
			if v == nil {
				delete(cfg, k)
			} else {
				cfg[k] = *v
			}
		}
		if exists {
			_, err = s.ZK().Set(p, encodeConfig(cfg), stat.Version)
		} else {
			_, err = s.ZK().Create(p, encodeConfig(cfg), 0, acl)
		}
		switch {
		case err == nil:
			return cfg, nil
		case errors.Is(err, zk.ErrBadVersion), errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrNodeExists):
		default:
			return nil, storeErr("write %s: %v", brokerConfigPath(n.ID()), err)
		}
	}
	return nil, storeErr("write %s: lost %d races in a row", brokerConfigPath(n.ID()), maxCASRetries)
}
