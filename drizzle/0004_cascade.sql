PRAGMA foreign_keys=OFF;--> statement-breakpoint
CREATE TABLE `__new_board_agents` (
	`room` text NOT NULL,
	`agent_id` text NOT NULL,
	`capabilities` text NOT NULL,
	`auth` text NOT NULL,
	`key_ref` text,
	`last_seen` text NOT NULL,
	`lost` integer NOT NULL,
	PRIMARY KEY(`room`, `agent_id`),
	FOREIGN KEY (`room`) REFERENCES `rooms`(`uuid`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
INSERT INTO `__new_board_agents`("room", "agent_id", "capabilities", "auth", "key_ref", "last_seen", "lost") SELECT "room", "agent_id", "capabilities", "auth", "key_ref", "last_seen", "lost" FROM `board_agents` WHERE "room" IN (SELECT "uuid" FROM "rooms");--> statement-breakpoint
DROP TABLE `board_agents`;--> statement-breakpoint
ALTER TABLE `__new_board_agents` RENAME TO `board_agents`;--> statement-breakpoint
PRAGMA foreign_keys=ON;--> statement-breakpoint
CREATE INDEX `board_agents_seen` ON `board_agents` (`last_seen`) WHERE lost = 0;--> statement-breakpoint
CREATE TABLE `__new_discrepancies` (
	`room` text NOT NULL,
	`id` integer NOT NULL,
	`thread_id` integer,
	`description` text NOT NULL,
	`severity` text NOT NULL,
	`source_msg_id` integer,
	`recorded_by` text NOT NULL,
	`status` text NOT NULL,
	`resolved_by` text,
	`created_at` text NOT NULL,
	`resolved_at` text,
	PRIMARY KEY(`room`, `id`),
	FOREIGN KEY (`room`) REFERENCES `rooms`(`uuid`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
INSERT INTO `__new_discrepancies`("room", "id", "thread_id", "description", "severity", "source_msg_id", "recorded_by", "status", "resolved_by", "created_at", "resolved_at") SELECT "room", "id", "thread_id", "description", "severity", "source_msg_id", "recorded_by", "status", "resolved_by", "created_at", "resolved_at" FROM `discrepancies` WHERE "room" IN (SELECT "uuid" FROM "rooms");--> statement-breakpoint
DROP TABLE `discrepancies`;--> statement-breakpoint
ALTER TABLE `__new_discrepancies` RENAME TO `discrepancies`;--> statement-breakpoint
CREATE TABLE `__new_events` (
	`room` text NOT NULL,
	`seq` integer NOT NULL,
	`ts` text NOT NULL,
	`type` text NOT NULL,
	`actor` text NOT NULL,
	`payload` text NOT NULL,
	`server` text NOT NULL,
	`prev` text NOT NULL,
	`sig` text,
	`leaf_hash` text NOT NULL,
	`checkpoint` text NOT NULL,
	PRIMARY KEY(`room`, `seq`),
	FOREIGN KEY (`room`) REFERENCES `rooms`(`uuid`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
INSERT INTO `__new_events`("room", "seq", "ts", "type", "actor", "payload", "server", "prev", "sig", "leaf_hash", "checkpoint") SELECT "room", "seq", "ts", "type", "actor", "payload", "server", "prev", "sig", "leaf_hash", "checkpoint" FROM `events` WHERE "room" IN (SELECT "uuid" FROM "rooms");--> statement-breakpoint
DROP TABLE `events`;--> statement-breakpoint
ALTER TABLE `__new_events` RENAME TO `events`;--> statement-breakpoint
CREATE TABLE `__new_handshakes` (
	`room` text NOT NULL,
	`id` integer NOT NULL,
	`agent_id` text NOT NULL,
	`context_hash` text NOT NULL,
	`auth` text NOT NULL,
	`pubkey_hex` text,
	`signature_hex` text,
	`ts` text,
	`nonce` text,
	`created_at` text NOT NULL,
	PRIMARY KEY(`room`, `id`),
	FOREIGN KEY (`room`) REFERENCES `rooms`(`uuid`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
INSERT INTO `__new_handshakes`("room", "id", "agent_id", "context_hash", "auth", "pubkey_hex", "signature_hex", "ts", "nonce", "created_at") SELECT "room", "id", "agent_id", "context_hash", "auth", "pubkey_hex", "signature_hex", "ts", "nonce", "created_at" FROM `handshakes` WHERE "room" IN (SELECT "uuid" FROM "rooms");--> statement-breakpoint
DROP TABLE `handshakes`;--> statement-breakpoint
ALTER TABLE `__new_handshakes` RENAME TO `handshakes`;--> statement-breakpoint
CREATE TABLE `__new_messages` (
	`room` text NOT NULL,
	`seq` integer NOT NULL,
	`agent_id` text NOT NULL,
	`text` text NOT NULL,
	`ts` text NOT NULL,
	`reply_to` integer,
	`auth` text NOT NULL,
	`key_ref` text,
	`pubkey_hex` text,
	`signature_hex` text,
	`ts_iso` text,
	`memory_root` text,
	`hash` text NOT NULL,
	PRIMARY KEY(`room`, `seq`),
	FOREIGN KEY (`room`) REFERENCES `rooms`(`uuid`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
INSERT INTO `__new_messages`("room", "seq", "agent_id", "text", "ts", "reply_to", "auth", "key_ref", "pubkey_hex", "signature_hex", "ts_iso", "memory_root", "hash") SELECT "room", "seq", "agent_id", "text", "ts", "reply_to", "auth", "key_ref", "pubkey_hex", "signature_hex", "ts_iso", "memory_root", "hash" FROM `messages` WHERE "room" IN (SELECT "uuid" FROM "rooms");--> statement-breakpoint
DROP TABLE `messages`;--> statement-breakpoint
ALTER TABLE `__new_messages` RENAME TO `messages`;--> statement-breakpoint
CREATE TABLE `__new_revisions` (
	`room` text NOT NULL,
	`id` integer NOT NULL,
	`thread_id` integer NOT NULL,
	`kind` text NOT NULL,
	`value` text NOT NULL,
	`author_agent_id` text NOT NULL,
	`auth` text NOT NULL,
	`via` text NOT NULL,
	`source_msg_id` integer,
	`quote` text,
	`created_at` text NOT NULL,
	PRIMARY KEY(`room`, `id`),
	FOREIGN KEY (`room`) REFERENCES `rooms`(`uuid`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
INSERT INTO `__new_revisions`("room", "id", "thread_id", "kind", "value", "author_agent_id", "auth", "via", "source_msg_id", "quote", "created_at") SELECT "room", "id", "thread_id", "kind", "value", "author_agent_id", "auth", "via", "source_msg_id", "quote", "created_at" FROM `revisions` WHERE "room" IN (SELECT "uuid" FROM "rooms");--> statement-breakpoint
DROP TABLE `revisions`;--> statement-breakpoint
ALTER TABLE `__new_revisions` RENAME TO `revisions`;--> statement-breakpoint
CREATE INDEX `revisions_thread` ON `revisions` (`room`,`thread_id`);--> statement-breakpoint
CREATE TABLE `__new_room_agents` (
	`room` text NOT NULL,
	`agent_id` text NOT NULL,
	`first_seq` integer NOT NULL,
	`pubkey_hex` text,
	PRIMARY KEY(`room`, `agent_id`),
	FOREIGN KEY (`room`) REFERENCES `rooms`(`uuid`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
INSERT INTO `__new_room_agents`("room", "agent_id", "first_seq", "pubkey_hex") SELECT "room", "agent_id", "first_seq", "pubkey_hex" FROM `room_agents` WHERE "room" IN (SELECT "uuid" FROM "rooms");--> statement-breakpoint
DROP TABLE `room_agents`;--> statement-breakpoint
ALTER TABLE `__new_room_agents` RENAME TO `room_agents`;--> statement-breakpoint
CREATE TABLE `__new_signature_nonces` (
	`room` text NOT NULL,
	`pubkey_hex` text NOT NULL,
	`nonce` text NOT NULL,
	`seq` integer NOT NULL,
	PRIMARY KEY(`room`, `pubkey_hex`, `nonce`),
	FOREIGN KEY (`room`) REFERENCES `rooms`(`uuid`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
INSERT INTO `__new_signature_nonces`("room", "pubkey_hex", "nonce", "seq") SELECT "room", "pubkey_hex", "nonce", "seq" FROM `signature_nonces` WHERE "room" IN (SELECT "uuid" FROM "rooms");--> statement-breakpoint
DROP TABLE `signature_nonces`;--> statement-breakpoint
ALTER TABLE `__new_signature_nonces` RENAME TO `signature_nonces`;--> statement-breakpoint
CREATE TABLE `__new_tasks` (
	`room` text NOT NULL,
	`id` integer NOT NULL,
	`status` text NOT NULL,
	`priority` integer NOT NULL,
	`claimant` text,
	`lease_until` text,
	`lease_hash` text,
	`data` text NOT NULL,
	PRIMARY KEY(`room`, `id`),
	FOREIGN KEY (`room`) REFERENCES `rooms`(`uuid`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
INSERT INTO `__new_tasks`("room", "id", "status", "priority", "claimant", "lease_until", "lease_hash", "data") SELECT "room", "id", "status", "priority", "claimant", "lease_until", "lease_hash", "data" FROM `tasks` WHERE "room" IN (SELECT "uuid" FROM "rooms");--> statement-breakpoint
DROP TABLE `tasks`;--> statement-breakpoint
ALTER TABLE `__new_tasks` RENAME TO `tasks`;--> statement-breakpoint
CREATE INDEX `tasks_open` ON `tasks` (`room`,`status`,`priority`);--> statement-breakpoint
CREATE INDEX `tasks_lease` ON `tasks` (`lease_until`) WHERE status = 'claimed';--> statement-breakpoint
CREATE TABLE `__new_threads` (
	`room` text NOT NULL,
	`id` integer NOT NULL,
	`subject` text NOT NULL,
	`subject_key` text NOT NULL,
	`current_value` text NOT NULL,
	`status` text NOT NULL,
	`opened_by` text NOT NULL,
	`opened_by_auth` text NOT NULL,
	`opener_key` text,
	`revisions_count` integer NOT NULL,
	`last_revision` text NOT NULL,
	`confirmations` text NOT NULL,
	`created_at` text NOT NULL,
	`updated_at` text NOT NULL,
	PRIMARY KEY(`room`, `id`),
	FOREIGN KEY (`room`) REFERENCES `rooms`(`uuid`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
INSERT INTO `__new_threads`("room", "id", "subject", "subject_key", "current_value", "status", "opened_by", "opened_by_auth", "opener_key", "revisions_count", "last_revision", "confirmations", "created_at", "updated_at") SELECT "room", "id", "subject", "subject_key", "current_value", "status", "opened_by", "opened_by_auth", "opener_key", "revisions_count", "last_revision", "confirmations", "created_at", "updated_at" FROM `threads` WHERE "room" IN (SELECT "uuid" FROM "rooms");--> statement-breakpoint
DROP TABLE `threads`;--> statement-breakpoint
ALTER TABLE `__new_threads` RENAME TO `threads`;--> statement-breakpoint
CREATE TABLE `__new_turn_rooms` (
	`room` text PRIMARY KEY NOT NULL,
	`status` text NOT NULL,
	`data` text NOT NULL,
	FOREIGN KEY (`room`) REFERENCES `rooms`(`uuid`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
INSERT INTO `__new_turn_rooms`("room", "status", "data") SELECT "room", "status", "data" FROM `turn_rooms` WHERE "room" IN (SELECT "uuid" FROM "rooms");--> statement-breakpoint
DROP TABLE `turn_rooms`;--> statement-breakpoint
ALTER TABLE `__new_turn_rooms` RENAME TO `turn_rooms`;--> statement-breakpoint
CREATE TABLE `__new_turns` (
	`room` text NOT NULL,
	`id` integer NOT NULL,
	`agent_id` text NOT NULL,
	`status` text NOT NULL,
	`deadline` text,
	`lease_hash` text,
	`data` text NOT NULL,
	PRIMARY KEY(`room`, `id`),
	FOREIGN KEY (`room`) REFERENCES `rooms`(`uuid`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
INSERT INTO `__new_turns`("room", "id", "agent_id", "status", "deadline", "lease_hash", "data") SELECT "room", "id", "agent_id", "status", "deadline", "lease_hash", "data" FROM `turns` WHERE "room" IN (SELECT "uuid" FROM "rooms");--> statement-breakpoint
DROP TABLE `turns`;--> statement-breakpoint
ALTER TABLE `__new_turns` RENAME TO `turns`;--> statement-breakpoint
CREATE INDEX `turns_due` ON `turns` (`deadline`) WHERE status IN ('ready', 'claimed');