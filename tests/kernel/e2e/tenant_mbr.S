# The hygiene tier's tenant (tests/kernel/e2e/test_hygiene.cpp, case 7): a 512-byte boot sector a
# VM's SeaBIOS runs from its boot disk. It reads 8 sectors at LBA 2048 of the next BIOS drive (the
# VM's NVMe, booted after the disk: the template's boot.from_nvme), says on COM1 whether they hold
# zeros, the tenant pattern or something else, then writes the pattern there, reads it back, and
# says so. INT 13h extensions (AH=42h read, AH=43h write) with a disk address packet; SeaBIOS
# serves them for NVMe (src/hw/nvme.c nvme_process_op). Assembled at 0x7c00, where the BIOS loads it.
        .code16
        .intel_syntax noprefix
        .text
        .globl _start
_start:
        cli
        xor ax, ax
        mov ds, ax
        mov es, ax
        mov ss, ax
        mov sp, 0x7c00
        sti
        cld
        inc dl                          # the boot disk is DL: the NVMe is the drive after it
        mov byte ptr [drive], dl
        mov ah, 0x42
        call disk
        jc read_failed
        call classify
        mov di, 0x8000
        call fill
        mov ax, 0x4300                  # AL=0: no verify
        call disk
        jc write_failed
        mov di, 0x8000                  # forget what was written, then read it back
        xor al, al
        mov cx, 4096
        rep stosb
        mov ah, 0x42
        call disk
        jc read_failed
        call same_as_pattern
        jne not_read_back
        mov si, offset wrote
        call print
        jmp halt
read_failed:
        mov si, offset no_read
        jmp failed
write_failed:
        mov si, offset no_write
failed:
        mov byte ptr [status], ah       # INT 13h's status of the failed call
        call print
        mov al, byte ptr [status]
        shr al, 4
        call hex_digit
        mov al, byte ptr [status]
        call hex_digit
        mov si, offset line_end
        call print
        jmp halt
not_read_back:
        mov si, offset lost
        call print
halt:
        cli
        hlt
        jmp halt

# INT 13h function AH on the NVMe, with the packet below; CF set on failure.
disk:
        mov dl, byte ptr [drive]
        mov si, offset packet
        int 0x13
        ret

# Says what the 4 KiB at 0x8000 hold.
classify:
        mov si, 0x8000
        mov cx, 4096
1:      lodsb
        or al, al
        jnz 2f
        loop 1b
        mov si, offset zeros
        jmp print
2:      call same_as_pattern
        jne 3f
        mov si, offset pattern
        jmp print
3:      mov si, offset other
        jmp print

# ZF set when the 4 KiB at 0x8000 are the pattern (built at 0x9000 to compare).
same_as_pattern:
        mov di, 0x9000
        call fill
        mov si, 0x8000
        mov di, 0x9000
        mov cx, 4096
        repe cmpsb
        ret

# The pattern at DI: 4 KiB of 0xa5 behind a 16-byte tag.
fill:
        push di
        mov al, 0xa5
        mov cx, 4096
        rep stosb
        pop di
        mov si, offset tag
        mov cx, 16
        rep movsb
        ret

# The low nibble of AL, as a hex digit, to COM1.
hex_digit:
        and al, 0x0f
        add al, '0'
        cmp al, '9'
        jbe 1f
        add al, 7
1:      mov byte ptr [digit], al
        mov si, offset digit
        jmp print

# The zero-terminated text at SI, to COM1 (0x3f8) once its transmitter is empty.
print:
        lodsb
        or al, al
        jz 2f
        mov bl, al
        mov dx, 0x3fd
1:      in al, dx
        test al, 0x20
        jz 1b
        mov al, bl
        mov dx, 0x3f8
        out dx, al
        jmp print
2:      ret

drive:  .byte 0
status: .byte 0
digit:  .byte 0, 0
packet: .byte 16, 0                     # its size, reserved
        .word 8                         # sectors
        .word 0x8000, 0                 # buffer offset, segment
        .quad 2048                      # LBA
tag:    .ascii "hostagent-tenant"
zeros:  .asciz "tenant: found zeros\r\n"
pattern: .asciz "tenant: found the pattern\r\n"
other:  .asciz "tenant: found other data\r\n"
wrote:  .asciz "tenant: wrote the pattern\r\n"
no_read: .asciz "tenant: read failed, status 0x"
no_write: .asciz "tenant: write failed, status 0x"
line_end: .asciz "\r\n"
lost:   .asciz "tenant: the pattern did not read back\r\n"
        .org 510
        .word 0xaa55
