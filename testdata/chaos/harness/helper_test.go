package harness

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"testing"
	"time"
)

// The test binary doubles as the node program of these tests: with
// CHAOS_HELPER set it serves, dials or tells the time instead of testing.
func TestMain(m *testing.M) {
	switch os.Getenv("CHAOS_HELPER") {
	case "":
		os.Exit(Main(m))
	case "serve": // echo lines on CHAOS_LISTEN, log every accept with the peer
		ln, err := net.Listen("tcp", os.Getenv("CHAOS_LISTEN"))
		if err != nil {
			fmt.Println("listen:", err)
			os.Exit(1)
		}
		fmt.Println("ready", ln.Addr())
		for {
			c, err := ln.Accept()
			if err != nil {
				continue
			}
			fmt.Println("accepted from", c.RemoteAddr().(*net.TCPAddr).IP)
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					fmt.Fprintln(c, sc.Text())
				}
			}()
		}
	case "dial": // one echo round trip to CHAOS_TARGET, then wait to be killed
		fmt.Println(echo(os.Getenv("CHAOS_TARGET"), time.Second))
		select {}
	case "now":
		fmt.Println("year", time.Now().Year())
	}
}

// echo dials addr, sends a line and reads it back; it returns "ok" or "err ...".
func echo(addr string, timeout time.Duration) string {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return "err " + err.Error()
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := fmt.Fprintln(c, "ping"); err != nil {
		return "err " + err.Error()
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != "ping\n" {
		return fmt.Sprintf("err %q %v", line, err)
	}
	return "ok"
}
