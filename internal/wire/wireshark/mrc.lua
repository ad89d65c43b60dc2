-- mrc.lua: Wireshark/tshark dissector for the MRC 1.0 headers as softmrc puts
-- them on the wire (softmrc wire format v1, docs/wire-format.md).
--
-- Stock Wireshark decodes RoCEv2 (UDP 4791) and the InfiniBand BTH, but not
-- the MRC opcodes 0xC6..0xDE nor what follows BTH: METH, TSETH, RETH on every
-- data packet, ImmDt, AETH, SETH + CC_STATE (SACK bitmap, reflected EV, M
-- verdict), NETH (NACK reason), PETH, ERTH/EETH, and the rtx/ts bits of BTH
-- byte 8. This script takes over UDP 4791 (and the 4971 alias), lets the
-- stock InfiniBand dissector draw the BTH as before (its infiniband.bth.*
-- fields stay), and adds an "MRC" tree with mrc.* fields for MRC opcodes.
--
-- Load it with:  tshark -X lua_script:internal/wire/wireshark/mrc.lua -r capture.pcap
-- or copy it to ~/.local/lib/wireshark/plugins/ (Wireshark >= 3.x).

local mrc = Proto("mrc", "MRC (Multipath Reliable Connection, softmrc wire format v1)")

local opcodes = {
	[0xC6] = "WRITE_FIRST", [0xC7] = "WRITE_MIDDLE", [0xC8] = "WRITE_LAST",
	[0xC9] = "WRITE_LAST_IMM", [0xCA] = "WRITE_ONLY", [0xCB] = "WRITE_ONLY_IMM",
	[0xD1] = "ACK", [0xD8] = "ENDPOINT_REQ", [0xD9] = "ENDPOINT_RESP",
	[0xDC] = "SACK", [0xDD] = "NACK", [0xDE] = "PROBE",
}
local nack_reasons = {
	[0x01] = "TRIMMED", [0x02] = "TRIMMED_LASTHOP", [0x06] = "NO_BITMAP",
	[0x07] = "NO_PKT_BUFFER", [0x0A] = "NO_RESOURCE", [0x0B] = "PSN_OOR_WINDOW",
	[0x19] = "UNEXP_EVENT", [0x80] = "WIMM_LIMIT",
}
local m_verdicts = { [0] = "NONE", [1] = "SKIP_ONCE", [2] = "ALWAYS_SKIP", [3] = "RESERVED" }
local ep_ops = { [0] = "PORT_STATUS_UPDATE", [1] = "EV_PROBE" }
local ftypes = { [1] = "TIMESTAMP" }
local dscp_names = { [10] = "TRIMMABLE", [12] = "TRIMMABLE_RETX", [14] = "NO_TRIM",
	[40] = "TRIMMED", [41] = "TRIMMED_LASTHOP", [46] = "CONTROL" }


local f_op      = ProtoField.uint8("mrc.opcode", "Opcode", base.HEX, opcodes)
local f_a       = ProtoField.bool("mrc.bth.a", "AckReq (A)", 8, nil, 0x80)
local f_r       = ProtoField.bool("mrc.bth.r", "R", 8, nil, 0x40)
local f_rtx     = ProtoField.bool("mrc.bth.rtx", "Retransmission (rtx)", 8, nil, 0x20)
local f_ts      = ProtoField.bool("mrc.bth.ts", "TSETH present (ts)", 8, nil, 0x10)
local f_dqp     = ProtoField.uint24("mrc.bth.dqp", "Destination QP", base.HEX)
local f_psn     = ProtoField.uint24("mrc.bth.psn", "PSN", base.DEC)
local f_ev      = ProtoField.uint32("mrc.ev", "EV (flow label low 16 << 16 | UDP source port)", base.HEX)
local f_plane   = ProtoField.uint8("mrc.ev.plane", "EV plane", base.DEC)
local f_t1      = ProtoField.uint8("mrc.ev.t1", "EV T1 index", base.DEC)
local f_trim    = ProtoField.bool("mrc.trimmed", "Trimmed")
local f_dscp    = ProtoField.uint8("mrc.dscp", "Outermost DSCP class", base.DEC, dscp_names)

local f_rqmsn   = ProtoField.uint16("mrc.meth.rqmsn", "RQMSN", base.DEC)
local f_msn     = ProtoField.uint16("mrc.meth.msn", "MSN", base.DEC)
local f_tst     = ProtoField.uint16("mrc.tseth.ts", "TX timestamp (1.024 us)", base.DEC)
local f_tsr     = ProtoField.bool("mrc.tseth.tsr", "tsr", 16, nil, 0x8000)
local f_ftype   = ProtoField.uint16("mrc.tseth.ftype", "ftype", base.DEC, ftypes, 0x000F)
local f_va      = ProtoField.uint64("mrc.reth.va", "Virtual address", base.HEX)
local f_rkey    = ProtoField.uint32("mrc.reth.rkey", "R_Key", base.HEX)
local f_dmalen  = ProtoField.uint32("mrc.reth.dmalen", "DMA length", base.DEC)
local f_imm     = ProtoField.uint32("mrc.immdt", "Immediate data", base.HEX)
local f_syn     = ProtoField.uint8("mrc.aeth.syndrome", "Syndrome", base.HEX)
local f_amsn    = ProtoField.uint24("mrc.aeth.msn", "MSN", base.DEC)

local f_sm      = ProtoField.uint16("mrc.seth.m", "M (verdict on the reflected EV)", base.DEC, m_verdicts, 0x0060)
local f_spr     = ProtoField.bool("mrc.seth.pr", "pr (answers a probe)", 16, nil, 0x0002)
local f_sapo    = ProtoField.int16("mrc.seth.ack_psn_offset", "ack_psn_offset / probe id", base.DEC)
local f_sev     = ProtoField.uint32("mrc.seth.ev", "Reflected EV", base.HEX)
local f_sspd    = ProtoField.uint16("mrc.seth.spdcid", "spdcid", base.HEX)
local f_sdpd    = ProtoField.uint16("mrc.seth.dpdcid", "dpdcid", base.HEX)
local f_scack   = ProtoField.uint24("mrc.seth.cack_psn", "Cumulative ACK PSN", base.DEC)
local f_scct    = ProtoField.uint8("mrc.seth.cc_type", "cc_type", base.DEC, nil, 0xF0)
local f_sccf    = ProtoField.uint8("mrc.seth.cc_fl", "cc_fl", base.DEC, nil, 0x0F)
local f_smpr    = ProtoField.uint8("mrc.seth.mpr", "MPR (x128 PSNs)", base.DEC)
local f_soff    = ProtoField.int16("mrc.seth.sack_offset", "sack_offset", base.DEC)
local f_sbm     = ProtoField.uint64("mrc.seth.bitmap", "SACK bitmap (bit i = PSN base+i received)", base.HEX)
local f_sbase   = ProtoField.uint24("mrc.seth.bitmap_base", "Bitmap base PSN", base.DEC)
local f_srcvd   = ProtoField.string("mrc.seth.received", "PSNs received (from bitmap)")
local f_cts     = ProtoField.uint16("mrc.cc.ts_echo", "Timestamp echo", base.DEC)
local f_cooo    = ProtoField.uint16("mrc.cc.ooo_count", "ooo_count", base.DEC, nil, 0x7FFF)
local f_crst    = ProtoField.bool("mrc.cc.restore_cwnd", "restore_cwnd", 8, nil, 0x80)
local f_cpen    = ProtoField.uint8("mrc.cc.rcv_cwnd_pen", "rcv_cwnd_pen", base.DEC, nil, 0x7F)
local f_crcvd   = ProtoField.uint24("mrc.cc.rcvd_bytes", "rcvd_bytes (x256 B)", base.DEC)

local f_nreason = ProtoField.uint8("mrc.neth.reason", "NACK reason", base.HEX, nack_reasons)
local f_nvend   = ProtoField.uint8("mrc.neth.vendor", "vendor_info", base.HEX)
local f_nev     = ProtoField.uint32("mrc.neth.ev", "Reflected EV", base.HEX)
local f_nspd    = ProtoField.uint16("mrc.neth.spdcid", "spdcid", base.HEX)
local f_ndpd    = ProtoField.uint16("mrc.neth.dpdcid", "dpdcid", base.HEX)
local f_npsn    = ProtoField.uint24("mrc.neth.nack_psn", "NACK PSN", base.DEC)
local f_ncct    = ProtoField.uint8("mrc.neth.cc_type", "cc_type", base.DEC, nil, 0xF0)
local f_nccf    = ProtoField.uint8("mrc.neth.cc_fl", "cc_fl", base.DEC, nil, 0x0F)
local f_nts     = ProtoField.uint16("mrc.neth.ts", "TX timestamp", base.DEC)

local f_pvend   = ProtoField.uint8("mrc.peth.vendor", "vendor_info", base.HEX)
local f_pid     = ProtoField.uint16("mrc.peth.probe_id", "Probe id", base.DEC)
local f_pspd    = ProtoField.uint16("mrc.peth.spdcid", "spdcid", base.HEX)
local f_pdpd    = ProtoField.uint16("mrc.peth.dpdcid", "dpdcid", base.HEX)
local f_pts     = ProtoField.uint16("mrc.peth.ts", "TX timestamp", base.DEC)
local f_ptsr    = ProtoField.bool("mrc.peth.tsr", "tsr", 16, nil, 0x8000)
local f_pft     = ProtoField.uint16("mrc.peth.ftype", "ftype", base.DEC, ftypes, 0x000F)

local f_eop     = ProtoField.uint8("mrc.ep.op", "Endpoint op", base.DEC, ep_ops, 0x30)
local f_evend   = ProtoField.uint8("mrc.ep.vendor", "vendor_info", base.HEX)
local f_emask   = ProtoField.uint32("mrc.ep.port_status_mask", "Port status mask (bit p set = port p up)", base.HEX)
local f_eup     = ProtoField.string("mrc.ep.ports_up", "Ports up")
local f_ets     = ProtoField.uint16("mrc.ep.ts", "TX timestamp", base.DEC)
local f_eft     = ProtoField.uint16("mrc.ep.ftype", "ftype", base.DEC, ftypes, 0x000F)
local f_icrc    = ProtoField.uint32("mrc.icrc", "ICRC (little-endian on the wire)", base.HEX)

mrc.fields = {
	f_op, f_a, f_r, f_rtx, f_ts, f_dqp, f_psn, f_ev, f_plane, f_t1, f_trim, f_dscp,
	f_rqmsn, f_msn, f_tst, f_tsr, f_ftype, f_va, f_rkey, f_dmalen, f_imm, f_syn, f_amsn,
	f_sm, f_spr, f_sapo, f_sev, f_sspd, f_sdpd, f_scack, f_scct, f_sccf, f_smpr, f_soff,
	f_sbm, f_sbase, f_srcvd, f_cts, f_cooo, f_crst, f_cpen, f_crcvd,
	f_nreason, f_nvend, f_nev, f_nspd, f_ndpd, f_npsn, f_ncct, f_nccf, f_nts,
	f_pvend, f_pid, f_pspd, f_pdpd, f_pts, f_ptsr, f_pft,
	f_eop, f_evend, f_emask, f_eup, f_ets, f_eft, f_icrc,
}

local e_short = ProtoExpert.new("mrc.short", "MRC headers truncated", expert.group.MALFORMED, expert.severity.ERROR)
mrc.experts = { e_short }

-- Fields of the headers below UDP, read back from the stock dissectors: the
-- EV lives in the UDP source port and the flow label of the IPv6 header that
-- carries UDP (the last one), the DSCP in the outermost header.
local fx_sport = Field.new("udp.srcport")
local fx_flow = Field.new("ipv6.flow")
local fx_dscp = Field.new("ipv6.tclass.dscp")

local udp_table = DissectorTable.get("udp.port")
local stock = udp_table:get_dissector(4791) -- the InfiniBand (RoCEv2) dissector

local function ext_len(op, ts)
	if op >= 0xC6 and op <= 0xCB then
		local n = 4 + 16
		if ts then n = n + 4 end
		if op == 0xC9 or op == 0xCB then n = n + 4 end
		return n
	end
	return ({ [0xD1] = 4, [0xDC] = 36, [0xDD] = 20, [0xDE] = 16, [0xD8] = 16, [0xD9] = 36 })[op]
end

function mrc.dissector(tvb, pinfo, tree)
	if stock then stock:call(tvb, pinfo, tree) end
	if tvb:len() < 12 then return end
	local op = tvb(0, 1):uint()
	local ts = bit32.band(tvb(8, 1):uint(), 0x10) ~= 0
	local n = ext_len(op, ts)
	if n == nil then return end -- not an MRC opcode: the stock dissector's job
	pinfo.cols.protocol = "MRC"
	local t = tree:add(mrc, tvb(), "MRC " .. opcodes[op])
	local bth = t:add(mrc, tvb(0, 12), "BTH (MRC view)")
	bth:add(f_op, tvb(0, 1))
	bth:add(f_dqp, tvb(5, 3))
	bth:add(f_a, tvb(8, 1)); bth:add(f_r, tvb(8, 1)); bth:add(f_rtx, tvb(8, 1)); bth:add(f_ts, tvb(8, 1))
	bth:add(f_psn, tvb(9, 3))
	local psn = tvb(9, 3):uint()
	local info = string.format("%s QP=0x%06x PSN=%d", opcodes[op], tvb(5, 3):uint(), psn)
	if bit32.band(tvb(8, 1):uint(), 0x20) ~= 0 then info = info .. " rtx" end

	local sports, flows, dscps = { fx_sport() }, { fx_flow() }, { fx_dscp() }
	if #sports > 0 and #flows > 0 then
		local ev = bit32.bor(bit32.lshift(bit32.band(flows[#flows].value, 0xFFFF), 16), sports[#sports].value)
		t:add(f_ev, ev):set_generated()
		t:add(f_plane, bit32.rshift(ev, 28)):set_generated()
		t:add(f_t1, bit32.band(bit32.rshift(ev, 20), 0xFF)):set_generated()
		info = info .. string.format(" EV=0x%08x", ev)
	end
	local dscp = nil
	if #dscps > 0 then
		dscp = dscps[1].value
		t:add(f_dscp, dscp):set_generated()
	end

	if tvb:len() < 12 + n then
		t:add_proto_expert_info(e_short)
		return
	end
	local x = tvb(12):tvb()
	local data = op >= 0xC6 and op <= 0xCB
	if data then
		local h = t:add(mrc, x(0, 4), "METH")
		h:add(f_rqmsn, x(0, 2)); h:add(f_msn, x(2, 2))
		local o = 4
		if ts then
			h = t:add(mrc, x(o, 4), "TSETH")
			h:add(f_tst, x(o, 2)); h:add(f_tsr, x(o + 2, 2)); h:add(f_ftype, x(o + 2, 2))
			o = o + 4
		end
		h = t:add(mrc, x(o, 16), "RETH")
		h:add(f_va, x(o, 8)); h:add(f_rkey, x(o + 8, 4)); h:add(f_dmalen, x(o + 12, 4))
		o = o + 16
		if op == 0xC9 or op == 0xCB then
			t:add(f_imm, x(o, 4))
			o = o + 4
		end
		local rest = x:len() - o
		if rest == 0 and (dscp == 40 or dscp == 41) then
			t:add(f_trim, true):set_generated()
			info = info .. " TRIMMED"
		end
	elseif op == 0xD1 then
		local h = t:add(mrc, x(0, 4), "AETH")
		h:add(f_syn, x(0, 1)); h:add(f_amsn, x(1, 3))
	elseif op == 0xDC then
		local h = t:add(mrc, x(0, 28), "SETH")
		h:add(f_sm, x(0, 2)); h:add(f_spr, x(0, 2)); h:add(f_sapo, x(2, 2))
		h:add(f_sev, x(4, 4)); h:add(f_sspd, x(8, 2)); h:add(f_sdpd, x(10, 2))
		h:add(f_scack, x(13, 3)); h:add(f_scct, x(16, 1)); h:add(f_sccf, x(16, 1))
		h:add(f_smpr, x(17, 1)); h:add(f_soff, x(18, 2)); h:add(f_sbm, x(20, 8))
		local base = (x(13, 3):uint() + x(18, 2):int()) % 0x1000000
		h:add(f_sbase, base):set_generated()
		local hi, lo = x(20, 4):uint(), x(24, 4):uint()
		local got = {}
		for i = 0, 63 do
			local word, b = lo, i
			if i >= 32 then word, b = hi, i - 32 end
			if bit32.band(bit32.rshift(word, b), 1) == 1 then
				got[#got + 1] = tostring((base + i) % 0x1000000)
			end
		end
		h:add(f_srcvd, table.concat(got, ",")):set_generated()
		local c = t:add(mrc, x(28, 8), "CC_STATE")
		c:add(f_cts, x(28, 2)); c:add(f_cooo, x(30, 2)); c:add(f_crst, x(32, 1))
		c:add(f_cpen, x(32, 1)); c:add(f_crcvd, x(33, 3))
		info = info .. string.format(" cack=%d M=%s reflEV=0x%08x", x(13, 3):uint(),
			m_verdicts[bit32.band(bit32.rshift(x(0, 2):uint(), 5), 3)], x(4, 4):uint())
	elseif op == 0xDD then
		local h = t:add(mrc, x(0, 20), "NETH")
		h:add(f_nreason, x(2, 1)); h:add(f_nvend, x(3, 1)); h:add(f_nev, x(4, 4))
		h:add(f_nspd, x(8, 2)); h:add(f_ndpd, x(10, 2)); h:add(f_npsn, x(13, 3))
		h:add(f_ncct, x(16, 1)); h:add(f_nccf, x(16, 1)); h:add(f_nts, x(18, 2))
		info = info .. " reason=" .. (nack_reasons[x(2, 1):uint()] or string.format("0x%02x", x(2, 1):uint()))
	elseif op == 0xDE then
		local h = t:add(mrc, x(0, 16), "PETH")
		h:add(f_pvend, x(3, 1)); h:add(f_pid, x(4, 2)); h:add(f_pspd, x(8, 2))
		h:add(f_pdpd, x(10, 2)); h:add(f_pts, x(12, 2)); h:add(f_ptsr, x(14, 2)); h:add(f_pft, x(14, 2))
	else -- 0xD8 ERTH, 0xD9 EETH
		local h = t:add(mrc, x(0, n), op == 0xD8 and "ERTH" or "EETH")
		h:add(f_eop, x(1, 1)); h:add(f_evend, x(3, 1)); h:add(f_emask, x(4, 4))
		local m, up = x(4, 4):uint(), {}
		for p = 0, 31 do
			if bit32.band(bit32.rshift(m, p), 1) == 1 then up[#up + 1] = tostring(p) end
		end
		h:add(f_eup, table.concat(up, ",")):set_generated()
		if op == 0xD8 then
			h:add(f_ets, x(12, 2)); h:add(f_eft, x(14, 2))
		else
			h:add(f_ets, x(28, 2))
		end
	end
	if tvb:len() >= 12 + n + 4 and not (data and tvb:len() == 12 + n) then
		t:add_le(f_icrc, tvb(tvb:len() - 4, 4))
	end
	pinfo.cols.info = info
end

udp_table:add(4791, mrc)
udp_table:add(4971, mrc)
